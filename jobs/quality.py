"""Validate the lakehouse's tables with their Great Expectations suites (lakehouse.quality).

    python -m jobs.quality [--layer bronze|silver|quarantine|speed|batch|all] [--table NAME ...]
                           [--from 2026-11-25T10:00Z] [--to 2026-11-25T12:00Z] [--run-id ID]
                           [--docs-dir PATH]

Validates the Delta snapshot (the latest version, pinned for the whole run) of each chosen
table that exists; a table that does not exist yet is skipped, with a line. Only the rows in
the time range [--from, --to) are validated, placed in time by one column per table:

    bronze.events_raw, bronze.quarantine, silver.events   kafka_timestamp (when it arrived)
    speed.* and batch.* views                             window_start / session_start

The default range is the last 2 days up to now. silver.events' event times must lie between
the epoch (the contract sets no lower bound: historic events are valid) and --to plus the
speed layer's future tolerance (speed.future_tolerance_seconds), the rule the speed layer
applies to each record.

Each check of a suite has an action. FAIL: the table is wrong and the run fails. WARN: the
run goes on and says so. QUARANTINE: the offending rows go to dq.quality_quarantine (the row
as JSON, its "dq:<check>" reasons, the table and the version validated); taking them out of
the table itself is the table's one writer's job, so nothing is hidden and nothing is
rewritten here. Every run appends one row per validated table to dq.quality_runs (verdict,
broken checks with their counts, seconds, Data Docs page). Both writes carry the run id as
their Delta transaction id: rerunning a run id writes nothing twice.

Prints one summary line per table, then `Data Docs: <index.html>` (the Great Expectations
Data Docs site, default {state}/dq/data_docs, listing every run) and a `quality result:` line.

Exit status: 0 every check passed or only WARN/QUARANTINE checks broke; 1 cannot run
(config, storage, Spark, another quality run writing); 2 bad arguments (nothing written);
4 a FAIL check broke (the broken checks and their first examples are printed; dq records and
Data Docs are written).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jobs.arguments import OneLineParser, iso_moment
from lakehouse.core.config import ConfigError, Settings, get_settings
from lakehouse.core.locks import WriterBusyError, exclusive_writer
from lakehouse.core.spark import SparkSetupError, get_spark
from lakehouse.core.storage import StorageError, ensure_bucket
from lakehouse.core.tables import QUALITY
from lakehouse.core.times import EPOCH
from lakehouse.transforms.views import VIEWS

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from lakehouse.quality.validate import SuiteResult

EXIT_PASSED = 0
EXIT_CANNOT_RUN = 1
EXIT_BAD_ARGUMENTS = 2
EXIT_FAILED = 4

DOCS_PREFIX = "Data Docs: "
RESULT_PREFIX = "quality result: "
BROKEN_PREFIX = "FAIL check broken: "  # one line per broken FAIL check, for the DAG's message
DEFAULT_LOOKBACK = timedelta(days=2)
LOCK_WAIT_SECONDS = 900

# The tables with a suite (lakehouse.quality.suites.suite_for), per layer, and the column
# that places each row in time for --from/--to.
LAYERS: dict[str, tuple[str, ...]] = {
    "bronze": ("bronze.events_raw",),
    "silver": ("silver.events",),
    "quarantine": ("bronze.quarantine",),
    "speed": tuple(v.speed_table for v in VIEWS.values()),
    "batch": tuple(v.batch_table for v in VIEWS.values()),
}
LAYERS["all"] = tuple(name for tables in LAYERS.values() for name in tables)
TIME_COLUMNS: dict[str, str] = {
    "bronze.events_raw": "kafka_timestamp",
    "bronze.quarantine": "kafka_timestamp",
    "silver.events": "kafka_timestamp",
    **{v.speed_table: v.time_column for v in VIEWS.values()},
    **{v.batch_table: v.time_column for v in VIEWS.values()},
}


class BadArguments(Exception):
    """The request cannot be run as given; nothing is written."""


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="python -m jobs.quality",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--layer",
        choices=list(LAYERS),
        help="the tables of a layer (default: all, unless --table is given)",
    )
    parser.add_argument(
        "--table",
        dest="tables",
        action="extend",
        nargs="+",
        default=[],
        metavar="NAME",
        help=f"a table to validate (repeatable): {', '.join(LAYERS['all'])}",
    )
    parser.add_argument("--from", dest="start", type=iso_moment, help="first instant (UTC)")
    parser.add_argument("--to", dest="end", type=iso_moment, help="end instant, exclusive (UTC)")
    parser.add_argument("--run-id", help="the run's identity in dq.* (Airflow passes its run id)")
    parser.add_argument(
        "--docs-dir", type=Path, help="the Data Docs site (default: {state}/dq/data_docs)"
    )
    return parser


@dataclass(frozen=True)
class Request:
    tables: tuple[str, ...]
    start: datetime
    end: datetime
    run_id: str
    docs_dir: Path | None  # None: lakehouse.quality.validate.default_docs_dir()


def checked_request(args: argparse.Namespace, now: datetime) -> Request:
    """The tables and range to validate; BadArguments says what is wrong with them."""
    unknown = [t for t in args.tables if t not in TIME_COLUMNS]
    if unknown:
        raise BadArguments(
            f"no data-quality suite for {', '.join(unknown)}; tables with a suite: "
            f"{', '.join(LAYERS['all'])}"
        )
    layer = args.layer or (None if args.tables else "all")
    tables = tuple(dict.fromkeys([*(LAYERS[layer] if layer else ()), *args.tables]))
    end = args.end or now
    start = args.start or min(end, now) - DEFAULT_LOOKBACK
    if start >= end:
        raise BadArguments(f"--from {_iso(start)} is not before --to {_iso(end)}")
    run_id = args.run_id or f"manual:{now:%Y%m%dT%H%M%S.%fZ}"
    if not run_id.strip():
        raise BadArguments("--run-id is empty")
    return Request(tables, start, end, run_id, args.docs_dir)


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def event_time_bounds(request: Request, settings: Settings) -> Any:
    """silver.events' EventTimeBounds: no lower bound in the contract (the epoch), and the
    speed layer's future rule at the end of the range."""
    from lakehouse.quality.suites import EventTimeBounds

    tolerance = timedelta(seconds=settings.speed.future_tolerance_seconds)
    return EventTimeBounds(EPOCH, request.end + tolerance)


@dataclass
class Validated:
    """One table's validation: its result and the rows its QUARANTINE checks refused."""

    table: str
    version: int
    result: SuiteResult
    routed: DataFrame  # the dq.quality_quarantine rows (lazy: read from the pinned version)
    seconds: float
    quarantined: int = 0

    @property
    def page(self) -> str | None:
        page = self.result.data_docs_page
        return None if page is None else str(page)


@dataclass
class Outcome:
    request: Request
    validated: list[Validated] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    docs_index: Path | None = None

    @property
    def failed(self) -> list[Validated]:
        from lakehouse.quality.validate import Verdict

        return [v for v in self.validated if v.result.verdict is Verdict.FAILED]


def validate_one(
    spark: SparkSession, settings: Settings, name: str, request: Request, docs_dir: Path
) -> Validated | None:
    """Validate `name`'s latest snapshot within the range; None when it does not exist yet."""
    from pyspark.sql import functions as F

    from lakehouse.core.delta_io import read_table_at, table_version
    from lakehouse.core.tables import table
    from lakehouse.quality.suites import suite_for
    from lakehouse.quality.validate import quarantine_rows, validate_dataframe

    target = table(name)
    version = table_version(spark, target, settings)
    if version is None:
        return None
    began = time.monotonic()
    snapshot = read_table_at(spark, target, settings, version)
    assert snapshot is not None
    column = F.col(TIME_COLUMNS[name])
    rows = snapshot.where((column >= F.lit(request.start)) & (column < F.lit(request.end)))
    bounds = event_time_bounds(request, settings) if name == "silver.events" else None
    result = validate_dataframe(
        rows, suite_for(name, bounds), docs_dir=docs_dir, run_name=request.run_id
    )
    refused = quarantine_rows(rows, result)
    routed = refused.select(
        F.lit(request.run_id).alias("run_id"),
        F.lit(name).alias("table_name"),
        F.lit(version).cast("long").alias("table_version"),
        F.to_json(F.struct(*[F.col(f"`{c}`") for c in rows.columns])).alias("row"),
        F.col("reasons"),
        F.col("reason"),
    )
    return Validated(name, version, result, routed, round(time.monotonic() - began, 2))


RUNS_SCHEMA = (
    "run_id string, table_name string, table_version long, verdict string, "
    "range_start timestamp, range_end timestamp, failures map<string,bigint>, "
    "broken string, quarantined long, seconds double, data_docs string, checked_at timestamp"
)


def _broken_json(result: SuiteResult) -> str:
    return json.dumps(
        [
            {
                "check": c.check,
                "action": c.action.value,
                "expectation": c.expectation,
                "unexpected_count": c.unexpected_count,
                "examples": list(c.examples),
            }
            for c in result.broken()
        ],
        default=str,
    )


def record(spark: SparkSession, settings: Settings, outcome: Outcome, checked_at: datetime) -> None:
    """Append the run to dq.quality_quarantine, then dq.quality_runs, once per run id."""
    from functools import reduce

    from pyspark.sql import functions as F

    from lakehouse.core.delta_io import append_once, read_table, small_frame
    from lakehouse.core.tables import table

    quarantine, runs = table("dq.quality_quarantine"), table("dq.quality_runs")
    app_id = f"{QUALITY}:{outcome.request.run_id}"
    routed = reduce(lambda a, b: a.unionByName(b), [v.routed for v in outcome.validated])
    routed = routed.withColumn("checked_at", F.lit(checked_at))
    # An empty append still creates the table and records the run id's transaction.
    append_once(routed, quarantine, settings, app_id, 0)
    counts = {
        r["table_name"]: int(r["count"])
        for r in read_table(spark, quarantine, settings)
        .where(F.col("run_id") == outcome.request.run_id)
        .groupBy("table_name")
        .count()
        .collect()
    }
    for v in outcome.validated:
        v.quarantined = counts.get(v.table, 0)
    rows = [
        (
            outcome.request.run_id,
            v.table,
            v.version,
            v.result.verdict.value,
            outcome.request.start,
            outcome.request.end,
            {c.check: c.unexpected_count for c in v.result.broken()},
            _broken_json(v.result),
            v.quarantined,
            v.seconds,
            v.page,
            checked_at,
        )
        for v in outcome.validated
    ]
    append_once(small_frame(spark, rows, RUNS_SCHEMA), runs, settings, app_id, 0)


def summary_line(v: Validated) -> str:
    result = v.result
    broken = ", ".join(
        f"{c.check} -> {c.action.value}"
        + ("" if c.unexpected_count is None else f" ({c.unexpected_count})")
        for c in result.broken()
    )
    routed = f"; {v.quarantined} rows to dq.quality_quarantine" if v.quarantined else ""
    return (
        f"{v.table} (version {v.version}): {result.verdict.value} in {v.seconds:.1f} s"
        f"{routed}{'; broken: ' + broken if broken else ''}"
    )


def result_line(outcome: Outcome) -> str:
    return RESULT_PREFIX + json.dumps(
        {
            "run_id": outcome.request.run_id,
            "from": _iso(outcome.request.start),
            "to": _iso(outcome.request.end),
            "passed": not outcome.failed,
            "data_docs": None if outcome.docs_index is None else str(outcome.docs_index),
            "skipped": outcome.skipped,
            "tables": {
                v.table: {
                    "version": v.version,
                    "verdict": v.result.verdict.value,
                    "broken": {c.check: c.unexpected_count for c in v.result.broken()},
                    "quarantined": v.quarantined,
                    "seconds": v.seconds,
                }
                for v in outcome.validated
            },
        }
    )


def run_quality(spark: SparkSession, settings: Settings, request: Request) -> Outcome:
    from lakehouse.quality.validate import default_docs_dir

    docs_dir = (request.docs_dir or default_docs_dir()).resolve()
    outcome = Outcome(request)
    print(
        f"==> quality: {len(request.tables)} tables, rows from {_iso(request.start)} to "
        f"{_iso(request.end)} (run {request.run_id})",
        flush=True,
    )
    for name in request.tables:
        validated = validate_one(spark, settings, name, request, docs_dir)
        if validated is None:
            outcome.skipped.append(name)
            print(f"{name}: skipped, the table does not exist yet", flush=True)
        else:
            outcome.validated.append(validated)
    if outcome.validated:
        record(spark, settings, outcome, datetime.now(UTC))
        outcome.docs_index = docs_dir / "index.html"
    return outcome


def report(outcome: Outcome) -> int:
    from lakehouse.quality.suites import Action

    for v in outcome.validated:
        print(summary_line(v), flush=True)
    if not outcome.validated:
        print("quality: no table to validate yet: nothing written", flush=True)
    if outcome.docs_index is not None:
        print(DOCS_PREFIX + str(outcome.docs_index), flush=True)
    print(result_line(outcome), flush=True)
    if not outcome.failed:
        return EXIT_PASSED
    for v in outcome.failed:
        for c in v.result.broken(Action.FAIL):
            print(f"{BROKEN_PREFIX}{v.table}: {c.describe()}", flush=True)
    return EXIT_FAILED


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)  # exits with status 2 on unusable arguments
    try:
        request = checked_request(args, datetime.now(UTC))
    except BadArguments as err:
        print(f"quality: {err}; nothing written", file=sys.stderr)
        return EXIT_BAD_ARGUMENTS
    try:
        settings = get_settings()
        if settings.storage.on_s3:
            ensure_bucket(settings)
        with exclusive_writer(settings, QUALITY, wait_seconds=LOCK_WAIT_SECONDS):
            spark = get_spark(QUALITY, settings)
            outcome = run_quality(spark, settings, request)
    except (ConfigError, SparkSetupError, StorageError, WriterBusyError) as err:
        print(f"quality: {err}", file=sys.stderr)
        return EXIT_CANNOT_RUN
    return report(outcome)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
