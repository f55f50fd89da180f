"""The batch layer's revenue view: batch.revenue_by_segment recomputed, complete, for a closed
interval [start, end), from bronze and the dimensions' history tables.

The events are bronze.events_raw's accepted first deliveries (the click views' batch reads
them the same way, lakehouse.batch.recompute), late ones included; the dimensions are
silver.users_history and silver.products_history at their latest versions when the run starts
(its pins). Each event is enriched as of its event_time and the view summed by the stream's
own functions (lakehouse.transforms.enrichment). An interval owns the hour windows that start
in it; a window's events all fall in its hour, so the events read are those of
[start, end + 1 hour).

Writes: one `replaceWhere` commit of exactly the interval's windows (each row with the history
versions it joined: users_version, products_version), then one row in
ops.batch_runs (view `revenue_by_segment`, last): the serving layer's seam for this view. A
window is final once the watermark (the click views' rule over the same bronze version) has
passed its end. A dimension change captured after the run is not in it: the next run of the
interval takes it in.

A rerun of an interval stands on its last run (`revenue_unchanged`) when that run made every
window final, bronze has had no commit since the version it read, and the history tables are
still at the versions it joined: the rows would come out the same.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F

from lakehouse.batch.recompute import (
    BRONZE,
    RUNS,
    Interval,
    NoDataError,
    accepted_in_bronze,
    batch_watermark,
)
from lakehouse.cdc.changelog import history_table
from lakehouse.core.config import Settings
from lakehouse.core.delta_io import (
    append_once,
    overwrite_where,
    read_table_at,
    small_frame,
    table_version,
)
from lakehouse.core.small_tables import table_version as latest_version
from lakehouse.core.tables import BATCH, table
from lakehouse.joins.dimensions import DIMENSIONS, history_at
from lakehouse.joins.enrichment import EVENT_COLUMNS
from lakehouse.transforms.enrichment import enrich_events, revenue_by_segment

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

VIEW = "revenue_by_segment"
REVENUE = table(f"batch.{VIEW}")
TIME_COLUMN = "window_start"
WINDOW = timedelta(hours=1)


@dataclass(frozen=True)
class RevenueRun:
    run_id: str
    interval: Interval
    bronze_version: int
    pins: dict[str, int | None]  # each history table's version joined (None: none yet)
    events: int  # accepted, deduplicated events in the interval (purchases and others)
    rows: int
    table_version: int
    watermark: datetime
    final_until: datetime  # windows starting before this are final
    seconds: float

    def summary(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "interval": str(self.interval),
            "view": VIEW,
            "bronze_version": self.bronze_version,
            "history_versions": self.pins,
            "events": self.events,
            "rows": self.rows,
            "version": self.table_version,
            "watermark": self.watermark.isoformat(),
            "final_until": self.final_until.isoformat(),
            "seconds": round(self.seconds, 1),
        }


def recompute_revenue(
    spark: SparkSession, settings: Settings, interval: Interval, run_id: str
) -> RevenueRun:
    """Recompute batch.revenue_by_segment's windows that start in `interval`; NoDataError,
    writing nothing, when bronze does not exist or holds no accepted event in it."""
    began, started_at = time.monotonic(), datetime.now(UTC)
    bronze_version = table_version(spark, BRONZE, settings)
    if bronze_version is None:
        raise NoDataError(
            f"{BRONZE.name} does not exist yet: run the speed layer first (it writes bronze)"
        )
    # Pinned before anything is read: the run joins one version of each history.
    pins = {
        name: latest_version(settings, history_table(captured))
        for name, (_, captured) in DIMENSIONS.items()
    }
    read = accepted_in_bronze(
        spark,
        settings,
        (interval, bronze_version),
        interval.start,
        ["kafka_timestamp", *EVENT_COLUMNS],
    )
    events = read.events
    try:
        watermark = batch_watermark(events, settings)
        in_reach = events.where(F.col("event_time") < F.lit(interval.end + WINDOW))
        users, products = (
            history_at(spark, settings, name, pins[name]) for name in ("users", "products")
        )
        enriched = enrich_events(in_reach.select(*EVENT_COLUMNS), users, products)
        condition = interval.condition(TIME_COLUMN)
        # Each row names the history versions it was joined with (its judge compares it with
        # the stream's rows only when the stream joined the same).
        rows = (
            revenue_by_segment(enriched)
            .where(condition)
            .withColumns(
                {f"{name}_version": F.lit(pins[name]).cast("bigint") for name in DIMENSIONS}
            )
        )
        version = overwrite_where(rows, REVENUE, settings, BATCH, condition)
    finally:
        events.unpersist()
    written = read_table_at(spark, REVENUE, settings, version)
    assert written is not None
    run = RevenueRun(
        run_id=run_id,
        interval=interval,
        bronze_version=bronze_version,
        pins=pins,
        events=read.in_interval,
        rows=written.where(condition).count(),
        table_version=version,
        watermark=watermark,
        final_until=min(interval.end, max(interval.start, watermark - WINDOW)),
        seconds=time.monotonic() - began,
    )
    _record(spark, settings, run, started_at, read.ingest_high_water)
    return run


def revenue_unchanged(settings: Settings, interval: Interval) -> str | None:
    """The id of the interval's last run, if its rows stand (module docstring), else None.
    Decided with delta-rs alone, so a job answers it before it starts Spark. The versions a run
    joined are on its rows: a run whose interval held no purchase names none, and is run again."""
    import pyarrow.compute as pc

    from lakehouse.core import small_tables

    exactly = (
        (pc.field("interval_start") == interval.start)
        & (pc.field("interval_end") == interval.end)
        & (pc.field("view") == VIEW)
    )
    runs = small_tables.table_rows(settings, RUNS, exactly)
    if not runs:
        return None
    last = max(runs, key=lambda r: r["finished_at"])
    if last["final_until"] < interval.end:
        return None
    if small_tables.table_version(settings, BRONZE) != last["bronze_version"]:
        return None
    window = (pc.field(TIME_COLUMN) >= interval.start) & (pc.field(TIME_COLUMN) < interval.end)
    written = small_tables.table_rows(settings, REVENUE, window, last["table_version"])
    joined = {tuple(r[f"{name}_version"] for name in DIMENSIONS) for r in written}
    now = tuple(latest_version(settings, history_table(c)) for _, c in DIMENSIONS.values())
    return last["run_id"] if joined == {now} else None


def _record(
    spark: SparkSession,
    settings: Settings,
    run: RevenueRun,
    started_at: datetime,
    ingest_high_water: datetime,
) -> None:
    row = {
        "run_id": run.run_id,
        "view": VIEW,
        "interval_start": run.interval.start,
        "interval_end": run.interval.end,
        "final_until": run.final_until,
        "rows": run.rows,
        "table_version": run.table_version,
        "bronze_version": run.bronze_version,
        "ingest_high_water": ingest_high_water,
        "watermark": run.watermark,
        "events": run.events,
        "started_at": started_at,
        "finished_at": datetime.now(UTC),
        "duration_seconds": run.seconds,
    }
    # Keyed by the run's identity, apart from the click views' record of the same run id: an
    # Airflow retry that got this far adds nothing.
    app = f"{BATCH}:{VIEW}:{run.run_id}"
    append_once(small_frame(spark, [row], RUNS), RUNS, settings, app, 0)
