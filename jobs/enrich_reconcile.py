"""Recompute the enrichment from the history tables and compare it with the stream's.

    python -m jobs.enrich_reconcile

As of the enrichment stream's last completed batch: each event's latest row in
silver.events_enriched against the same events joined again, all at once, with the history
tables at that batch's pins; speed.revenue_by_segment's partial rows, corrections included,
against the view summed from the recompute. Prints both comparisons and
`enrich_reconcile result: {...}`; writes nothing.

Exit status (jobs.contract): 0 equal; 1 cannot run (config, storage, Spark); 2 bad arguments;
3 nothing to compare: the stream has completed no batch; 4 an event or a window differs (the
first differing ones are printed last).
"""

from __future__ import annotations

import argparse
import sys

from jobs.arguments import say
from jobs.contract import Exit, exit_with, result_line
from jobs.parser import OneLineParser
from lakehouse.core.config import ConfigError, get_settings
from lakehouse.core.spark import SparkSetupError, get_spark_checked
from lakehouse.core.storage import StorageError

JOB = "enrich_reconcile"


def main(argv: list[str]) -> Exit:
    OneLineParser(
        prog="python -m jobs.enrich_reconcile",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    ).parse_args(argv)
    try:
        from lakehouse.joins.reconcile import (
            NothingToReconcile,
            check_started,
            reconcile_enrichment,
        )

        settings = get_settings()
        check_started(settings)
        spark = get_spark_checked(JOB, settings)
        judged = reconcile_enrichment(spark, settings)
    except NothingToReconcile as err:
        print(f"{JOB}: {err}: nothing compared", file=sys.stderr)
        return Exit.NOTHING_TO_DO
    except (ConfigError, SparkSetupError, StorageError) as err:
        print(f"{JOB}: {err}", file=sys.stderr)
        return Exit.CANNOT_RUN
    for what, seen in (("events", judged.events), ("windows", judged.windows)):
        say(f"{what}: {seen.compared} compared, {seen.differing} differ")
    as_of = f"as of enrichment batch {judged.batch_id}"
    verdict = (
        f"enrichment reconciliation passed, {as_of}: every event and window equals its recompute"
        if judged.equal
        else f"enrichment reconciliation failed, {as_of}: "
        f"{judged.events.differing} of {judged.events.compared} events and "
        f"{judged.windows.differing} of {judged.windows.compared} windows differ"
    )
    failures = [*judged.events.examples, *judged.windows.examples]
    result = {
        "batch_id": judged.batch_id,
        "equal": judged.equal,
        "verdict": verdict,
        "events": {"compared": judged.events.compared, "differing": judged.events.differing},
        "windows": {"compared": judged.windows.compared, "differing": judged.windows.differing},
        "failures": failures,
    }
    say(result_line(JOB, result))
    if not judged.equal:
        print("\n".join([verdict, *failures]), file=sys.stderr)
        return Exit.CHECKS_FAILED
    return Exit.OK


if __name__ == "__main__":
    exit_with(main(sys.argv[1:]))
