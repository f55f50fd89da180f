"""The changelog stream: Debezium's changelog topics into the CDC tables.

    python -m jobs.cdc                  # run until stopped
    python -m jobs.cdc --available-now  # apply what the topics hold now, then exit

Reads every captured table's topic (`cdc.tables`: shop.public.<table>) from the earliest offset
(the checkpoint remembers where it is) and hands every micro-batch to lakehouse.cdc.changelog:
bronze.<table>_changes, silver.<table>_current and silver.<table>_history. Stopping gracefully:
Ctrl-C, SIGTERM, or create the stop file (default <state>/run/cdc.stop); the running batch
finishes first. Whatever way it stops, a restart continues exactly where it left off.

Exit status (jobs.contract): 0 stopped, 1 cannot run (config, Kafka, storage, Spark, another
changelog stream running), 2 bad arguments, 5 the query failed (a restart resumes it).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from jobs.contract import Exit, exit_with
from jobs.stream_job import run_stream_job
from lakehouse.core.config import Settings
from lakehouse.core.paths import cdc_stop_file


def run_changelog(
    settings: Settings, stop_file: Path, available_now: bool, say: Callable[[str], None]
) -> None:
    from lakehouse.cdc.stream import run_changelog

    run_changelog(settings, stop_file, available_now, say)


def main(argv: list[str]) -> Exit:
    return run_stream_job(
        argv,
        prog="python -m jobs.cdc",
        doc=__doc__,
        title="changelog stream",
        run=run_changelog,
        default_stop_file=cdc_stop_file,
    )


if __name__ == "__main__":
    exit_with(main(sys.argv[1:]))
