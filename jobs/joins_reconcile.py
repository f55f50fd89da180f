"""Recompute every join's output from its inputs, compare it with the stream's, record it.

    python -m jobs.joins_reconcile [--join enrichment ...] [--run-id <id>]

Each join's judge (lakehouse.reconcile.joins) recomputes its outputs with the stream's own
transforms over the same inputs, as of the stream's last completed batch, and compares row by
row. Records one row per output in dq.reconciliation_runs (run id `joins:<id>`; a rerun with
the same --run-id replaces its own rows), prints the summary and
`joins_reconcile result: {...}`. A join whose stream has completed no batch is named and left
out.

Exit status (jobs.contract): 0 every output equal; 1 cannot run (config, storage, Spark, or
another reconciliation still writing after 15 minutes: nothing written); 2 bad arguments
(nothing written); 3 nothing to compare: no join's stream has completed a batch (nothing
written); 4 an output differs (recorded; which, and its first differing rows, printed last).
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime

from jobs.arguments import say
from jobs.contract import Exit, exit_with, result_line
from jobs.parser import OneLineParser
from lakehouse.core.config import ConfigError, get_settings
from lakehouse.core.locks import WriterBusyError
from lakehouse.core.spark import SparkSetupError, get_spark_checked
from lakehouse.core.storage import StorageError

JOB = "joins_reconcile"


def build_parser() -> argparse.ArgumentParser:
    from lakehouse.reconcile.joins import judges

    parser = OneLineParser(
        prog="python -m jobs.joins_reconcile",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--join",
        dest="joins",
        action="append",
        choices=sorted(judges()),
        default=[],
        help="a join to judge (repeatable; default: every one)",
    )
    parser.add_argument("--run-id", help="the run's identity in dq.* (Airflow passes its run id)")
    return parser


def main(argv: list[str]) -> Exit:
    args = build_parser().parse_args(argv)
    if args.run_id is not None and not args.run_id.strip():
        print(
            f"{JOB}: --run-id is empty: give the run's identity, or leave it out; nothing written",
            file=sys.stderr,
        )
        return Exit.BAD_REQUEST
    try:
        from lakehouse.reconcile.joins import (
            NoJoinToJudge,
            check_started,
            compare_joins,
            result,
            summary_text,
        )

        settings = get_settings()
        now = datetime.now(UTC)
        run_id = args.run_id or f"manual:{now:%Y%m%dT%H%M%S}"
        try:
            check_started(settings, args.joins)
            spark = get_spark_checked(JOB, settings)
            rec = compare_joins(spark, settings, run_id, now, args.joins)
        except NoJoinToJudge as err:
            print(f"{JOB}: {err}: nothing compared, nothing written", file=sys.stderr)
            return Exit.NOTHING_TO_DO
    # LookupError: a stream moved on too far to find its last batch's versions; run again.
    except (ConfigError, SparkSetupError, StorageError, WriterBusyError, LookupError) as err:
        print(f"{JOB}: {err}", file=sys.stderr)
        return Exit.CANNOT_RUN
    outcome = result(rec, run_id, recorded=True)
    say(summary_text(rec, run_id))
    say(result_line(JOB, outcome))
    if not rec.passed:
        print("\n".join([outcome["verdict"], *outcome["failures"]]), file=sys.stderr, flush=True)
        return Exit.CHECKS_FAILED
    return Exit.OK


if __name__ == "__main__":
    exit_with(main(sys.argv[1:]))
