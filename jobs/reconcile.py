"""Reconcile two sources of the views, window by window, and gate on the result.

    python -m jobs.reconcile --left batch --right speed [--view event_counts_1m ...]
                             [--from 2026-11-25T10:00Z] [--to 2026-11-25T12:00Z]
                             [--batch-run <batch run id> ...] [--run-id <id>]

Compares every key of every view that is final on both sides (batch: up to the final-until
mark of its runs; speed: up to its watermark minus the view's settle time), within
[--from, --to) or the intervals of the given batch runs. A difference is explained when the
late events one side set aside (or the batch had not read yet) account for it exactly.

Writes dq.reconciliation_windows and dq.reconciliation_runs (a rerun with the same --run-id
replaces its own rows) and the HTML report {state}/dq/reports/<run id>.html, then prints the
summary and `reconcile report: <path>`.

Exit status (jobs.contract): 0 gate passed; 1 cannot run (config, storage, Spark, another
reconcile writing); 2 bad arguments (nothing written); 3 nothing to compare: no window final
on both sides (nothing written); 4 gate failed: more windows than dq.max_unexplained_windows
have an unexplained difference beyond their threshold (the count and first windows are
printed; the report and dq records are written).
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime

from jobs.arguments import add_comparison_arguments, say
from jobs.contract import Exit, exit_with, result_line
from jobs.parser import OneLineParser
from lakehouse.core.config import ConfigError, get_settings
from lakehouse.core.locks import WriterBusyError
from lakehouse.core.spark import SparkSetupError
from lakehouse.core.storage import StorageError
from lakehouse.reconcile.request import (
    BadComparison,
    Compared,
    ComparisonRequest,
    VersionRemoved,
    reconcile_and_record,
)

JOB = "reconcile"
REPORT_PREFIX = "reconcile report: "


def checked_request(args: argparse.Namespace) -> ComparisonRequest:
    return ComparisonRequest.checked(
        args.left, args.right, args.views, args.start, args.end, args.batch_runs
    )


def report(compared: Compared) -> Exit:
    """Print what a recorded comparison found; its exit status."""
    say(compared.summary)
    if not compared.compared:
        print("reconcile: no window is final on both sides: nothing written", file=sys.stderr)
        return Exit.NOTHING_TO_DO
    say(f"{REPORT_PREFIX}{compared.report}")
    say(result_line(JOB, compared.result()))
    if not compared.verdict.passed:
        print(compared.verdict.message(), file=sys.stderr, flush=True)
        return Exit.CHECKS_FAILED
    return Exit.OK


def main(argv: list[str]) -> Exit:
    parser = OneLineParser(
        prog="python -m jobs.reconcile",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_comparison_arguments(parser)
    parser.add_argument("--run-id", help="the run's identity in dq.* (Airflow passes its run id)")
    args = parser.parse_args(argv)
    try:
        request = checked_request(args)
        now = datetime.now(UTC)
        run_id = args.run_id or f"manual:{request.left}-{request.right}:{now:%Y%m%dT%H%M%S}"
        compared = reconcile_and_record(get_settings(), request, run_id, say)
    except BadComparison as err:
        print(f"reconcile: {err}; nothing written", file=sys.stderr)
        return Exit.BAD_REQUEST
    except VersionRemoved as err:
        print(f"reconcile: {err}: nothing to compare, nothing written", file=sys.stderr)
        return Exit.NOTHING_TO_DO
    except (ConfigError, SparkSetupError, StorageError, WriterBusyError) as err:
        print(f"reconcile: {err}", file=sys.stderr)
        return Exit.CANNOT_RUN
    return report(compared)


if __name__ == "__main__":
    exit_with(main(sys.argv[1:]))
