"""A data-quality run: validate tables with their suites and record what was found.

Each chosen table's latest Delta snapshot is pinned for the run and only its rows within the
request's time range are validated. Every run appends one row per validated table to
dq.quality_runs and the rows QUARANTINE checks refused to dq.quality_quarantine, both with the
run id as Delta transaction id: a rerun of a run id writes nothing twice.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lakehouse.core.config import Settings
from lakehouse.core.locks import exclusive_writer
from lakehouse.core.spark import get_spark
from lakehouse.core.storage import ensure_bucket
from lakehouse.core.tables import QUALITY
from lakehouse.core.times import EPOCH
from lakehouse.transforms.views import VIEWS

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from lakehouse.quality.suites import EventTimeBounds
    from lakehouse.quality.validate import SuiteResult

Say = Callable[[str], None]
# Another quality run (a backfill beside the schedule) finishes in minutes: wait for it.
LOCK_WAIT_SECONDS = 900
# What a run validates when no range is given: the last two days.
DEFAULT_LOOKBACK = timedelta(days=2)


# The tables with a suite (lakehouse.quality.suites.suite_for), per layer, and the column
# that places each row in time for --from/--to.
LAYERS: dict[str, tuple[str, ...]] = {
    "bronze": ("bronze.events_raw",),
    "silver": ("silver.events",),
    "quarantine": ("bronze.quarantine",),
    "speed": tuple(v.speed_table for v in VIEWS.values()),
    "batch": tuple(v.batch_table for v in VIEWS.values()),
    "commerce": (
        "silver.order_events",
        "silver.payments",
        "silver.order_state",
        "silver.order_transitions_rejected",
    ),
    "joins": (
        "silver.events_enriched",
        "speed.revenue_by_segment",
        "batch.revenue_by_segment",
        "silver.purchase_attribution",
        "silver.order_payments",
        "silver.user_orders",
    ),
}
LAYERS["all"] = tuple(name for tables in LAYERS.values() for name in tables)
# None: a table of current state, validated whole whatever the range.
TIME_COLUMNS: dict[str, str | None] = {
    "bronze.events_raw": "kafka_timestamp",
    "bronze.quarantine": "kafka_timestamp",
    "silver.events": "kafka_timestamp",
    **{v.speed_table: v.time_column for v in VIEWS.values()},
    **{v.batch_table: v.time_column for v in VIEWS.values()},
    "silver.order_events": "kafka_timestamp",
    "silver.payments": "kafka_timestamp",
    "silver.order_state": "updated_at",
    "silver.order_transitions_rejected": "event_time",
    "silver.events_enriched": "event_time",
    "speed.revenue_by_segment": "window_start",
    "batch.revenue_by_segment": "window_start",
    "silver.purchase_attribution": "purchase_time",
    "silver.order_payments": "placed_at",
    "silver.user_orders": None,
}


class BadQualityRequest(ValueError):
    """The request cannot be run as given; nothing is written."""


@dataclass(frozen=True)
class QualityRequest:
    tables: tuple[str, ...]
    start: datetime
    end: datetime
    run_id: str
    docs_dir: Path | None  # None: lakehouse.quality.validate.default_docs_dir()

    @classmethod
    def checked(
        cls,
        layer: str | None,
        tables: list[str],
        start: datetime | None,
        end: datetime | None,
        run_id: str | None,
        docs_dir: Path | None,
        now: datetime,
    ) -> QualityRequest:
        """The tables of `layer` then `tables` (every layer when neither is given), in
        [start, end): by default the DEFAULT_LOOKBACK up to now. BadQualityRequest says what
        is wrong."""
        unknown = [t for t in tables if t not in TIME_COLUMNS]
        if unknown:
            raise BadQualityRequest(
                f"no data-quality suite for {', '.join(unknown)}; tables with a suite: "
                f"{', '.join(LAYERS['all'])}"
            )
        layer = layer or (None if tables else "all")
        chosen = tuple(dict.fromkeys([*(LAYERS[layer] if layer else ()), *tables]))
        end = end or now
        start = start or min(end, now) - DEFAULT_LOOKBACK
        if start >= end:
            raise BadQualityRequest(f"--from {iso(start)} is not before --to {iso(end)}")
        run_id = f"manual:{now:%Y%m%dT%H%M%S.%fZ}" if run_id is None else run_id
        if not run_id.strip():
            raise BadQualityRequest("--run-id is empty")
        return cls(chosen, start, end, run_id, docs_dir)


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def event_time_bounds(request: QualityRequest, settings: Settings) -> EventTimeBounds:
    """silver.events' EventTimeBounds: no lower bound in the contract (the epoch), and the
    speed layer's future rule at the end of the range."""
    # Great Expectations takes seconds to import: only once a run needs it.
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

    def summary(self) -> str:
        """One line: the verdict, the rows routed to quarantine and the checks broken."""
        broken = ", ".join(
            f"{c.check} -> {c.action.value}"
            + ("" if c.unexpected_count is None else f" ({c.unexpected_count})")
            for c in self.result.broken()
        )
        routed = f"; {self.quarantined} rows to dq.quality_quarantine" if self.quarantined else ""
        return (
            f"{self.table} (version {self.version}): {self.result.verdict.value} in "
            f"{self.seconds:.1f} s{routed}{'; broken: ' + broken if broken else ''}"
        )


@dataclass
class QualityOutcome:
    request: QualityRequest
    validated: list[Validated] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    docs_index: Path | None = None

    @property
    def failed(self) -> list[Validated]:
        from lakehouse.quality.validate import Verdict

        return [v for v in self.validated if v.result.verdict is Verdict.FAILED]


def validate_one(
    spark: SparkSession, settings: Settings, name: str, request: QualityRequest, docs_dir: Path
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
    time_column = TIME_COLUMNS[name]
    rows = snapshot
    if time_column is not None:
        column = F.col(time_column)
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


def record(
    spark: SparkSession, settings: Settings, outcome: QualityOutcome, checked_at: datetime
) -> None:
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
    append_once(small_frame(spark, rows, runs), runs, settings, app_id, 0)


def result_of(outcome: QualityOutcome) -> dict[str, Any]:
    """What a run found, as its caller reports it (the job's result line)."""
    from lakehouse.quality.suites import Action

    return {
        "run_id": outcome.request.run_id,
        "from": iso(outcome.request.start),
        "to": iso(outcome.request.end),
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
        # One line per broken FAIL check: what a DAG's failure message lists.
        "failed_checks": [
            f"{v.table}: {c.describe()}"
            for v in outcome.failed
            for c in v.result.broken(Action.FAIL)
        ],
    }


def check_quality(settings: Settings, request: QualityRequest, say: Say = print) -> QualityOutcome:
    """Validate `request`'s tables as the one quality writer (a concurrent run is waited for)."""
    if settings.storage.on_s3:
        ensure_bucket(settings)
    with exclusive_writer(settings, QUALITY, wait_seconds=LOCK_WAIT_SECONDS):
        spark = get_spark(QUALITY, settings)
        return run_quality(spark, settings, request, say)


def run_quality(
    spark: SparkSession, settings: Settings, request: QualityRequest, say: Say = print
) -> QualityOutcome:
    from lakehouse.quality.validate import default_docs_dir

    docs_dir = (request.docs_dir or default_docs_dir()).resolve()
    outcome = QualityOutcome(request)
    say(
        f"==> quality: {len(request.tables)} tables, rows from {iso(request.start)} to "
        f"{iso(request.end)} (run {request.run_id})"
    )
    for name in request.tables:
        validated = validate_one(spark, settings, name, request, docs_dir)
        if validated is None:
            outcome.skipped.append(name)
            say(f"{name}: skipped, the table does not exist yet")
        else:
            outcome.validated.append(validated)
    if outcome.validated:
        record(spark, settings, outcome, datetime.now(UTC))
        outcome.docs_index = docs_dir / "index.html"
    return outcome
