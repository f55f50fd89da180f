"""Tributary's library: configuration, the SparkSession factory, the table registry and I/O.

Importing this package has no side effects and pulls in no third-party module, so the
stdlib-only bootstrap (infra/bootstrap.py) can use lakehouse.paths and lakehouse.secrets
before the virtual environment exists.
"""
