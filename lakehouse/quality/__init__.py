"""Data quality: Great Expectations suites per layer and view, and how to run them.

    suites.py    the suites as code: checks = (expectation, action FAIL/WARN/QUARANTINE)
    validate.py  run a suite on a Delta snapshot or a micro-batch; Data Docs; quarantine rows

Both import Great Expectations (and validate.py, Spark): DAG files import them inside tasks.
"""
