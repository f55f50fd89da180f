"""The commerce stream: the order-events and payments topics into bronze, silver and the order
state they fold to.

    python -m jobs.commerce                  # run until stopped
    python -m jobs.commerce --available-now  # process what the topics hold now, then exit

Reads both topics from their earliest offsets on a first start (the checkpoint remembers where
it is) and hands every micro-batch to lakehouse.commerce.processor: bronze.commerce_raw,
bronze.commerce_quarantine, silver.order_events, silver.payments, silver.order_state,
silver.order_transitions_rejected and ops.commerce_progress. Stopping gracefully: Ctrl-C,
SIGTERM, or create the stop file (default <state>/run/commerce.stop); the running batch
finishes first.

Exit status (jobs.contract): 0 stopped, 1 cannot run (config, storage, Kafka, Spark, another
commerce stream running), 2 bad arguments, 5 the query failed (a restart resumes it).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from jobs.contract import Exit, exit_with
from jobs.stream_job import run_stream_job
from lakehouse.core.config import Settings
from lakehouse.core.paths import commerce_stop_file


def run_commerce(
    settings: Settings, stop_file: Path, available_now: bool, say: Callable[[str], None]
) -> None:
    from lakehouse.commerce.stream import run_commerce

    run_commerce(settings, stop_file, available_now, say)


def main(argv: list[str]) -> Exit:
    return run_stream_job(
        argv,
        prog="python -m jobs.commerce",
        doc=__doc__,
        title="commerce stream",
        run=run_commerce,
        default_stop_file=commerce_stop_file,
    )


if __name__ == "__main__":
    exit_with(main(sys.argv[1:]))
