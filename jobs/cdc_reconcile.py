"""Recompute the CDC tables from bronze, compare them with the changelog stream's, record it.

    python -m jobs.cdc_reconcile [--table users ...] [--run-id <id>]

For every captured table (`cdc.tables`, or each --table): its current rows and type-2 history
recomputed from bronze.<table>_changes alone, against silver.<table>_current and
silver.<table>_history, as of the stream's last completed batch (a key with a change still in
flight is left out and counted). Records one row per table and kind in dq.reconciliation_runs
(run id `cdc:<id>`; a rerun with the same --run-id replaces its own rows), prints the summary
and `cdc_reconcile result: {...}`.

Exit status (jobs.contract): 0 every table equal; 1 cannot run (config, storage, Spark, or
another reconciliation still writing after 15 minutes: nothing written); 2 bad arguments
(nothing written); 3 nothing to compare: the stream has completed no batch (nothing
written); 4 a table differs (recorded; which table and kind, and its first differing rows,
are printed last).
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime

from jobs.arguments import say
from jobs.contract import Exit, exit_with, result_line
from jobs.parser import OneLineParser
from lakehouse.cdc.reconcile import NothingToReconcile, check_started
from lakehouse.core.config import ConfigError, get_settings
from lakehouse.core.locks import WriterBusyError
from lakehouse.core.spark import SparkSetupError, get_spark_checked
from lakehouse.core.storage import StorageError
from lakehouse.reconcile.changelog_request import (
    BadChangelogRequest,
    checked_run_id,
    checked_tables,
    compare_changelog,
)

JOB = "cdc_reconcile"


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="python -m jobs.cdc_reconcile",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--table",
        dest="tables",
        action="append",
        default=[],
        metavar="NAME",
        help="a captured table to compare (repeatable; default: every one in cdc.tables)",
    )
    parser.add_argument("--run-id", help="the run's identity in dq.* (Airflow passes its run id)")
    return parser


def main(argv: list[str]) -> Exit:
    args = build_parser().parse_args(argv)
    try:
        settings = get_settings()
        tables = checked_tables(settings, args.tables)
        now = datetime.now(UTC)
        run_id = checked_run_id(args.run_id, f"manual:{now:%Y%m%dT%H%M%S}")
        check_started(settings)
        spark = get_spark_checked(JOB, settings)
        compared = compare_changelog(spark, settings, run_id, now, tables)
    except BadChangelogRequest as err:
        print(f"{JOB}: {err}; nothing written", file=sys.stderr)
        return Exit.BAD_REQUEST
    except NothingToReconcile as err:
        print(f"{JOB}: {err}: nothing compared, nothing written", file=sys.stderr)
        return Exit.NOTHING_TO_DO
    except (ConfigError, SparkSetupError, StorageError, WriterBusyError) as err:
        print(f"{JOB}: {err}", file=sys.stderr)
        return Exit.CANNOT_RUN
    result = compared.result()
    say(compared.summary())
    say(result_line(JOB, result))
    if not compared.passed:
        print("\n".join([result["verdict"], *result["failures"]]), file=sys.stderr, flush=True)
        return Exit.CHECKS_FAILED
    return Exit.OK


if __name__ == "__main__":
    exit_with(main(sys.argv[1:]))
