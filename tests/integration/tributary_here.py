"""`tributary` (jobs/cli.py) run in the test's own process, as `.venv/bin/tributary ARGS`
would run it, through `run_job_here`.

Two things differ from a process of its own, and are made up for here:

- PySpark logs an SQL error as a JSON line on standard error, through its own loggers, which
  our session silences (lakehouse.core.spark). Those loggers write to the stream they found
  when they were made, not to what the test captures; so what they log during the command is
  added to its standard error here, as a process would have shown it.
- `tributary sql` registers the serving views and sets a parser rule on its session; the
  session is the test's, so both are undone after the command.
"""

from __future__ import annotations

import logging

from lakehouse.transforms.views import VIEWS
from tests.jobs_in_process import Ran, RunJob

# The PySpark loggers that write a query's error with its JVM stack trace.
QUERY_ERROR_LOGGERS = ("SQLQueryContextLogger", "DataFrameQueryContextLogger")
PYSPARK_LOGGED = "PySpark logged: "


class _Kept(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.NOTSET)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{PYSPARK_LOGGED}{record.levelname} {record.getMessage()}\n")


def run_tributary(run_job_here: RunJob, *args: str, **env: str) -> Ran:
    """`tributary ARGS` with `env` added to the environment: exit status and output."""
    kept = _Kept()
    loggers = [logging.getLogger(name) for name in QUERY_ERROR_LOGGERS]
    for logger in loggers:
        logger.addHandler(kept)
    try:
        ran = run_job_here("jobs.cli", *args, **env)
    finally:
        for logger in loggers:
            logger.removeHandler(kept)
        _undo_session_changes()
    return Ran(ran.returncode, ran.stdout, ran.stderr + "".join(kept.lines))


def _undo_session_changes() -> None:
    from pyspark.sql import SparkSession

    spark = SparkSession.getActiveSession()
    if spark is None:
        return
    spark.conf.unset("spark.sql.ansi.enforceReservedKeywords")
    for name in VIEWS:
        spark.catalog.dropTempView(f"serving_{name}")
