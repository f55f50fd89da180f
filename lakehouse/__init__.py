"""Tributary's library: configuration, the SparkSession factory, the table registry and I/O.

Importing this package has no side effects and pulls in no third-party module, so the
stdlib-only bootstrap (infra/bootstrap.py) can use lakehouse.core.paths and lakehouse.core.secrets
before the virtual environment exists.
"""
