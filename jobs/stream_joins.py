"""The windowed stream-stream joins: purchases attributed to the clicks before them, orders
joined with their payments.

    python -m jobs.stream_joins                  # run until stopped
    python -m jobs.stream_joins --available-now  # join what the sources hold now, then exit
    python -m jobs.stream_joins --reset          # remove their tables and checkpoints

Two Structured Streaming queries in one application (lakehouse.joins.windowed), each over two
Delta streams with a watermark per side: silver.events' purchases x its clicks ->
silver.purchase_attribution (inner), silver.order_events' placed orders x silver.payments ->
silver.order_payments (left outer: an order unpaid when the watermark passes its hour is
emitted once, paid = false); one ops.join_progress row per batch. --available-now also runs
the batches without data that the watermark's advance calls for, so everything the final
watermark settles is emitted before it exits. Stopping gracefully: Ctrl-C, SIGTERM, or create
the stop file (default <state>/run/stream_joins.stop); the running batches finish first. A
join's tables belong to its checkpoint: with another one (the old one deleted) it refuses to
start until --reset.

Exit status (jobs.contract): 0 stopped (or reset), 1 cannot run (config, storage, a source
table missing, tables of another checkpoint, Spark, other stream joins running), 2 bad
arguments, 5 a query failed (a restart resumes it).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from jobs.contract import Exit, exit_with
from jobs.stream_job import run_stream_job
from lakehouse.core.config import Settings
from lakehouse.core.paths import stream_joins_stop_file


def run_joins(
    settings: Settings, stop_file: Path, available_now: bool, say: Callable[[str], None]
) -> None:
    from lakehouse.joins.windowed import run_joins

    run_joins(settings, stop_file, available_now, say)


def reset_joins(settings: Settings) -> list[str]:
    from lakehouse.joins.windowed import reset_joins

    return reset_joins(settings)


def main(argv: list[str]) -> Exit:
    return run_stream_job(
        argv,
        prog="python -m jobs.stream_joins",
        doc=__doc__,
        title="stream joins",
        run=run_joins,
        default_stop_file=stream_joins_stop_file,
        reset=reset_joins,
    )


if __name__ == "__main__":
    exit_with(main(sys.argv[1:]))
