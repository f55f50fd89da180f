"""The enrichment stream: silver.events joined with the shop's history tables as of each
event's time.

    python -m jobs.enrich                  # run until stopped
    python -m jobs.enrich --available-now  # enrich what silver holds now, then exit
    python -m jobs.enrich --reset          # remove its tables and checkpoint, to start afresh

Reads silver.events from its first version (the checkpoint remembers where it is) and hands
every micro-batch to lakehouse.joins.enrichment: silver.events_enriched (a later row of an
event corrects an earlier one when a dimension change arrived after it) and
speed.revenue_by_segment. Stopping gracefully: Ctrl-C, SIGTERM, or create the stop file
(default <state>/run/enrich.stop); the running batch finishes first. Its tables belong to its
checkpoint: with another one (the old one deleted) it refuses to start until --reset.

Exit status (jobs.contract): 0 stopped (or reset), 1 cannot run (config, storage, no
silver.events yet, tables of another checkpoint, Spark, another enrichment stream running),
2 bad arguments, 5 the query failed (a restart resumes it).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from jobs.contract import Exit, exit_with
from jobs.stream_job import run_stream_job
from lakehouse.core.config import Settings
from lakehouse.core.paths import enrichment_stop_file


def run_enrichment(
    settings: Settings, stop_file: Path, available_now: bool, say: Callable[[str], None]
) -> None:
    from lakehouse.joins.stream import run_enrichment

    run_enrichment(settings, stop_file, available_now, say)


def reset_enrichment(settings: Settings) -> list[str]:
    from lakehouse.joins.stream import reset_enrichment

    return reset_enrichment(settings)


def main(argv: list[str]) -> Exit:
    return run_stream_job(
        argv,
        prog="python -m jobs.enrich",
        doc=__doc__,
        title="enrichment stream",
        run=run_enrichment,
        default_stop_file=enrichment_stop_file,
        reset=reset_enrichment,
    )


if __name__ == "__main__":
    exit_with(main(sys.argv[1:]))
