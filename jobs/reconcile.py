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

Exit status: 0 gate passed; 1 cannot run (config, storage, Spark, another reconcile writing);
2 bad arguments (nothing written); 3 nothing to compare: no window final on both sides
(nothing written); 4 gate failed: more windows than dq.max_unexplained_windows have an
unexplained difference beyond their threshold (the count and first windows are printed;
the report and dq records are written).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from jobs.arguments import OneLineParser, iso_moment
from lakehouse.core.config import ConfigError, Settings, get_settings
from lakehouse.core.locks import WriterBusyError, exclusive_writer
from lakehouse.core.spark import SparkSetupError, get_spark
from lakehouse.core.storage import StorageError, ensure_bucket
from lakehouse.core.tables import RECONCILE
from lakehouse.transforms.views import VIEWS

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from lakehouse.reconcile import GateVerdict, Reconciliation

EXIT_PASSED = 0
EXIT_CANNOT_RUN = 1
EXIT_BAD_ARGUMENTS = 2
EXIT_NOTHING_COMPARED = 3
EXIT_GATE_FAILED = 4
REPORT_PREFIX = "reconcile report: "
RESULT_PREFIX = "reconcile result: "
LOCK_WAIT_SECONDS = 900


class BadArguments(Exception):
    """The request cannot be run as given; nothing is written."""


def source_name(text: str) -> str:
    from lakehouse.reconcile.sources import UnknownSourceError, named_source

    try:
        named_source(text)
    except UnknownSourceError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return text


def add_comparison_arguments(parser: argparse.ArgumentParser) -> None:
    """What to compare: shared by this job and `tributary compare`."""
    sides = "batch, speed (the live speed layer) or replay:<version>"
    parser.add_argument(
        "--left", type=source_name, default="batch", help=f"left side: {sides} (batch)"
    )
    parser.add_argument(
        "--right", type=source_name, default="speed", help=f"right side: {sides} (speed)"
    )
    parser.add_argument(
        "--view",
        dest="views",
        action="append",
        choices=list(VIEWS),
        help="a view to compare (repeatable; default: every view)",
    )
    parser.add_argument("--from", dest="start", type=iso_moment, help="first instant (UTC)")
    parser.add_argument("--to", dest="end", type=iso_moment, help="end instant, exclusive (UTC)")
    parser.add_argument(
        "--batch-run",
        dest="batch_runs",
        action="append",
        default=[],
        help="compare the interval(s) this batch run recomputed (repeatable; Airflow passes "
        "the runs whose assets triggered it)",
    )


@dataclass(frozen=True)
class Request:
    left: str
    right: str
    views: list[str]
    start: datetime | None
    end: datetime | None
    batch_runs: list[str]


class VersionRemoved(Exception):
    """A replay:<version> side names a version that existed and was removed. Not a bad
    request: the reconcile DAG compares every version a replay announced, and one may be
    removed before its comparison runs. Nothing to compare, as for an empty interval."""


def checked_request(args: argparse.Namespace) -> Request:
    if args.left == args.right:
        raise BadArguments(f"--left and --right are both {args.left!r}: compare two sources")
    if args.start and args.end and args.start >= args.end:
        raise BadArguments(f"--from {args.start} is not before --to {args.end}")
    if args.batch_runs and (args.start or args.end):
        raise BadArguments("give --batch-run or --from/--to, not both")
    views = list(dict.fromkeys(args.views or VIEWS))
    return Request(args.left, args.right, views, args.start, args.end, args.batch_runs)


def compare_sources(
    spark: SparkSession, settings: Settings, request: Request, run_id: str
) -> Reconciliation:
    from lakehouse.reconcile import named_source, reconcile
    from lakehouse.reconcile.sources import batch_run_intervals

    check_replay_sides(spark, settings, request)
    intervals = None
    if request.batch_runs:
        intervals, unknown = batch_run_intervals(spark, settings, request.batch_runs)
        if unknown:
            raise BadArguments(f"no batch run recorded in ops.batch_runs as {', '.join(unknown)}")
    return reconcile(
        spark,
        settings,
        named_source(request.left),
        named_source(request.right),
        request.views,
        run_id,
        datetime.now(UTC),
        request.start,
        request.end,
        ranges=intervals,
    )


def check_replay_sides(spark: SparkSession, settings: Settings, request: Request) -> None:
    """A replay:<version> side must name a version that holds tables: the comparison would
    otherwise find no table and compare nothing, which is not a passed gate."""
    from lakehouse.reconcile.sources import REPLAY_PREFIX
    from lakehouse.replay.versions import list_versions

    sides = (request.left, request.right)
    wanted = [s[len(REPLAY_PREFIX) :] for s in sides if s.startswith(REPLAY_PREFIX)]
    if not wanted:
        return
    found = {v.version: v for v in list_versions(spark, settings)}
    for version in wanted:
        if version not in found:
            raise BadArguments(f"no version {version}; versions: {', '.join(found) or 'none yet'}")
        if found[version].status == "removed":
            raise VersionRemoved(f"version {version} was removed: its tables are gone")


def summary(run: Reconciliation, verdict: GateVerdict) -> str:
    """The run's summary; when nothing was compared it says so instead of naming the gate,
    which has nothing to pass on."""
    from lakehouse.reconcile import summary_text

    lines = summary_text(run, verdict).splitlines()
    if not run.compared:
        lines[-1] = "nothing to compare: no window is final on both sides"
    return "\n".join(lines)


def result_line(run: Reconciliation, verdict: GateVerdict, report: str | None) -> str:
    return RESULT_PREFIX + json.dumps(
        {
            "run_id": run.run_id,
            "left": run.left,
            "right": run.right,
            "passed": verdict.passed,
            "beyond_threshold": verdict.beyond_threshold,
            "report": report,
            "views": {
                v.view: {**v.counts, "compared": v.compared, "note": v.note} for v in run.views
            },
        }
    )


def main(argv: list[str]) -> int:
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
    except BadArguments as err:
        print(f"reconcile: {err}; nothing written", file=sys.stderr)
        return EXIT_BAD_ARGUMENTS
    now = datetime.now(UTC)
    run_id = args.run_id or f"manual:{request.left}-{request.right}:{now:%Y%m%dT%H%M%S}"
    try:
        settings = get_settings()
        if settings.storage.on_s3:
            ensure_bucket(settings)
        with exclusive_writer(settings, RECONCILE, wait_seconds=LOCK_WAIT_SECONDS):
            spark = get_spark(RECONCILE, settings)
            return reconcile_and_record(spark, settings, request, run_id)
    except BadArguments as err:
        print(f"reconcile: {err}; nothing written", file=sys.stderr)
        return EXIT_BAD_ARGUMENTS
    except VersionRemoved as err:
        print(f"reconcile: {err}: nothing to compare, nothing written", file=sys.stderr)
        return EXIT_NOTHING_COMPARED
    except (ConfigError, SparkSetupError, StorageError, WriterBusyError) as err:
        print(f"reconcile: {err}", file=sys.stderr)
        return EXIT_CANNOT_RUN


def reconcile_and_record(
    spark: SparkSession, settings: Settings, request: Request, run_id: str
) -> int:
    from lakehouse.reconcile import gate, publish

    print(f"==> reconcile {request.left} vs {request.right} (run {run_id})", flush=True)
    run = compare_sources(spark, settings, request, run_id)
    try:
        verdict = gate(run)
        if not run.compared:
            print(summary(run, verdict), flush=True)
            print("reconcile: no window is final on both sides: nothing written", file=sys.stderr)
            return EXIT_NOTHING_COMPARED
        path = publish(spark, settings, run, verdict)
    finally:
        run.release()
    print(summary(run, verdict), flush=True)
    print(REPORT_PREFIX + str(path), flush=True)
    print(result_line(run, verdict, str(path)), flush=True)
    if not verdict.passed:
        print(verdict.message(), file=sys.stderr, flush=True)
        return EXIT_GATE_FAILED
    return EXIT_PASSED


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
