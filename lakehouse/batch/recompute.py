"""The batch layer: recompute every view, complete, for a closed interval [start, end).

Reads bronze.events_raw (the master dataset) at one pinned version and runs the speed
layer's own parse, validate and view functions on it as a static DataFrame, keeping each
event's first delivery in bronze (batch.first_deliveries, brought up to date first). Late
events are simply events here, so the results are complete.

Which rows an interval owns: those whose view time (window_start, session_start) is in
[start, end). Every such row is computed from all the events it depends on, including events
before `start` (a session's quiet gap) and after `end` (a sliding window's tail, a session
that goes on), so the result never depends on how time is cut into intervals.

Writes: one `replaceWhere` commit per view over exactly the interval's rows, then one row per
view in ops.batch_runs (last, so a run killed half-way is never taken as done). A rerun
replaces the same rows with the same values. After that, the files reruns replaced long ago are
deleted from each view table whose last vacuum is old enough (`batch` in config/base.yaml).
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from pyspark import StorageLevel
from pyspark.sql import functions as F

from lakehouse.batch.first_deliveries import first_deliveries_from
from lakehouse.batch.unchanged import Unchanged, bronze_unchanged, unchanged_since_last_run
from lakehouse.core.config import Settings
from lakehouse.core.delta_io import (
    append_once,
    overwrite_where,
    read_table_at,
    small_frame,
    table_created_at,
    table_version,
)
from lakehouse.core.delta_maintenance import last_vacuum_end, vacuum_replaced_files
from lakehouse.core.tables import BATCH, Table, table
from lakehouse.core.times import EPOCH, TimeRangeError, from_micros, handled
from lakehouse.ops.migrate import require_bytes
from lakehouse.transforms.lateness import WatermarkRule, partition_marks
from lakehouse.transforms.views import VIEW_INPUT_COLUMNS, VIEWS, View

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

RUNS = table("ops.batch_runs")
BRONZE = table("bronze.events_raw")
# How far back in a table's log to look for its last vacuum. One that ended more commits ago
# than this counts as none (a backfill of that many intervals has replaced enough to vacuum).
VACUUM_LOOKBACK_COMMITS = 100


class IntervalError(ValueError):
    """The interval asked for cannot be recomputed (reversed, in the future, unaligned, out
    of the handled times)."""


class NoDataError(Exception):
    """Nothing to recompute: no bronze table, or no event in the interval."""


class IntervalUnchanged(NoDataError):
    """Nothing to recompute: the interval's last run, `standing_run`, stands
    (lakehouse.batch.unchanged)."""

    def __init__(self, message: str, standing_run: str) -> None:
        super().__init__(message)
        self.standing_run = standing_run


@dataclass(frozen=True)
class Interval:
    start: datetime
    end: datetime

    def __post_init__(self) -> None:
        # DAGs and jobs build intervals without checked(): a time out of range would only
        # overflow deep in recompute_interval, after Spark started.
        _handled_bound("start", self.start)
        _handled_bound("end", self.end)

    @classmethod
    def checked(cls, start: datetime, end: datetime, now: datetime) -> Interval:
        """The interval, after the checks that keep a bad request from writing anything."""
        start, end = _handled_bound("start", start), _handled_bound("end", end)
        if start >= end:
            raise IntervalError(f"the interval is empty or reversed: start {start} >= end {end}")
        if end > now:
            raise IntervalError(
                f"the interval ends in the future ({end} > now {now:%Y-%m-%d %H:%M:%S}): "
                "only closed intervals can be recomputed"
            )
        for name, moment in (("start", start), ("end", end)):
            if moment.second or moment.microsecond:
                raise IntervalError(f"{name} {moment} is not a whole minute (windows are minutes)")
        return cls(start, end)

    def condition(self, column: str) -> str:
        """SQL: `column` is in [start, end)."""
        return f"{column} >= {_sql_ts(self.start)} AND {column} < {_sql_ts(self.end)}"

    def __str__(self) -> str:
        return f"[{self.start:%Y-%m-%dT%H:%MZ}, {self.end:%Y-%m-%dT%H:%MZ})"


@dataclass(frozen=True)
class ViewResult:
    view: str
    rows: int
    table_version: int
    final_until: datetime  # rows placed before this are final under the lateness policy


@dataclass(frozen=True)
class BatchRun:
    run_id: str
    interval: Interval
    bronze_version: int
    ingest_high_water: datetime  # newest Kafka timestamp in the bronze version read
    watermark: datetime  # as the speed layer's rule puts it over the events read
    events: int  # accepted, deduplicated events placed in the interval
    views: list[ViewResult]
    seconds: float
    vacuumed: tuple[str, ...] = ()  # the tables this run vacuumed

    def summary(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "interval": str(self.interval),
            "bronze_version": self.bronze_version,
            "events": self.events,
            "watermark": self.watermark.isoformat(),
            "views": {
                v.view: {
                    "rows": v.rows,
                    "version": v.table_version,
                    "final_until": v.final_until.isoformat(),
                }
                for v in self.views
            },
            "seconds": round(self.seconds, 1),
            "vacuumed": list(self.vacuumed),
        }


def refuse_unchanged(settings: Settings, interval: Interval) -> None:
    """IntervalUnchanged, decided with delta-rs before a job starts Spark, when the interval's
    last run read bronze's latest version with every view final (bronze_unchanged); every
    other case is recompute_interval's to decide."""
    unchanged = bronze_unchanged(settings, interval)
    if unchanged is not None:
        raise unchanged_error(interval, unchanged)


def unchanged_error(interval: Interval, unchanged: Unchanged) -> IntervalUnchanged:
    return IntervalUnchanged(f"{interval} {unchanged}: nothing recomputed", unchanged.run_id)


def recompute_interval(
    spark: SparkSession, settings: Settings, interval: Interval, run_id: str, force: bool = False
) -> BatchRun:
    """Recompute the interval, unless its last run stands (`force`: recompute it anyway)."""
    began = time.monotonic()
    started_at = datetime.now(UTC)
    bronze_version = table_version(spark, BRONZE, settings)
    if bronze_version is None:
        raise NoDataError(
            f"{BRONZE.name} does not exist yet: run the speed layer first (it writes bronze)"
        )
    unchanged = None if force else unchanged_since_last_run(spark, settings, interval)
    if unchanged is not None:
        raise unchanged_error(interval, unchanged)
    lookback = timedelta(seconds=max(v.lookback_seconds for v in VIEWS.values()))
    # Only what the run's figures and the views read: less to shuffle and cache.
    read = accepted_in_bronze(
        spark,
        settings,
        (interval, bronze_version),
        interval.start - lookback,
        ["kafka_timestamp", *VIEW_INPUT_COLUMNS],
    )
    events = read.events
    try:
        watermark = batch_watermark(events, settings)

        # Each view's write is largely planning and committing on the driver, one core's
        # work: side by side the three finish sooner. Each writes a table of its own.
        def write(v: View) -> ViewResult:
            return _write_view(spark, settings, v, events, interval, watermark)

        with ThreadPoolExecutor(len(VIEWS)) as pool:
            results = list(pool.map(write, VIEWS.values()))
    finally:
        events.unpersist()
    run = BatchRun(
        run_id=run_id,
        interval=interval,
        bronze_version=bronze_version,
        ingest_high_water=read.ingest_high_water,
        watermark=watermark,
        events=read.in_interval,
        views=results,
        seconds=time.monotonic() - began,
    )
    _record_run(spark, settings, run, started_at)
    return replace(run, vacuumed=vacuum_if_due(spark, settings, datetime.now(UTC)))


@dataclass(frozen=True)
class BronzeRead:
    events: DataFrame  # persisted: the caller unpersists it
    in_interval: int  # how many of them are in the interval
    ingest_high_water: datetime  # the newest Kafka timestamp among them


def accepted_in_bronze(
    spark: SparkSession,
    settings: Settings,
    at: tuple[Interval, int],
    since: datetime,
    columns: list[str],
) -> BronzeRead:
    """The accepted first deliveries in bronze at a version with an event time from `since`
    on, with kafka_partition (the watermark is decided per partition) and `columns`, for an
    interval (`at`: the interval, the bronze version); NoDataError when none is in it."""
    interval, bronze_version = at
    # Parsing decodes bytes: string bronze from an older release is migrated first.
    require_bytes(spark, settings, [BRONZE])
    raw = read_table_at(spark, BRONZE, settings, bronze_version)
    assert raw is not None
    events = (
        first_deliveries_from(spark, settings, raw, since, columns)
        .select("kafka_partition", *columns)
        .persist(StorageLevel.MEMORY_AND_DISK)
    )
    try:
        read = events.agg(
            F.count_if(F.expr(interval.condition("event_time"))).alias("in_interval"),
            F.max(F.unix_micros("kafka_timestamp")).alias("ingest_high_water"),
        ).first()
        assert read is not None
        if not read["in_interval"]:
            raise NoDataError(
                f"no accepted event in {interval} in {BRONZE.name} version {bronze_version}: "
                "nothing written"
            )
    except BaseException:
        events.unpersist()
        raise
    return BronzeRead(events, int(read["in_interval"]), from_micros(read["ingest_high_water"]))


def batch_watermark(events: DataFrame, settings: Settings) -> datetime:
    """The speed layer's watermark rule (transforms.lateness) over accepted events read from
    bronze from a time on, so that the newest of them are all there."""
    rule = WatermarkRule.of(settings)
    supported = partition_marks(events, rule.support_events).supported_newest(rule)
    if supported is None:  # too few events to support any: nothing is final yet
        return EPOCH
    return from_micros(supported) - timedelta(seconds=rule.allowed_lateness_seconds)


def vacuum_if_due(spark: SparkSession, settings: Settings, now: datetime) -> tuple[str, ...]:
    """Vacuum each batch view table whose last vacuum ended `batch.vacuum_every_hours` ago or
    more; the batch job is their one writer, so it looks after them. A table younger than the
    retention (`batch.vacuum_after_hours`) is not due: no file in it is old enough to go."""
    every = timedelta(hours=settings.batch.vacuum_every_hours)
    retention = timedelta(hours=settings.batch.vacuum_after_hours)

    def vacuumed(target: Table) -> bool:
        if now - table_created_at(spark, target, settings) < retention:
            return False
        last = last_vacuum_end(spark, target, settings, VACUUM_LOOKBACK_COMMITS)
        if last is not None and now - last < every:
            return False
        vacuum_replaced_files(spark, target, settings, settings.batch.vacuum_after_hours)
        return True

    targets = [table(v.batch_table) for v in VIEWS.values()]
    # Side by side, as the views were written: a table each.
    with ThreadPoolExecutor(len(targets)) as pool:
        done = list(pool.map(vacuumed, targets))
    return tuple(t.name for t, was in zip(targets, done, strict=True) if was)


def _write_view(
    spark: SparkSession,
    settings: Settings,
    v: View,
    events: DataFrame,
    interval: Interval,
    watermark: datetime,
) -> ViewResult:
    needed = events.where(F.col("event_time") >= F.lit(interval.start - _s(v.lookback_seconds)))
    if v.lookahead_seconds is not None:
        needed = needed.where(F.col("event_time") < F.lit(interval.end + _s(v.lookahead_seconds)))
    rows = v.compute(needed).where(interval.condition(v.time_column))
    target = table(v.batch_table)
    version = overwrite_where(rows, target, settings, BATCH, interval.condition(v.time_column))
    written = read_table_at(spark, target, settings, version)
    assert written is not None
    mine = written.where(interval.condition(v.time_column))
    final_until = min(interval.end, max(interval.start, watermark - _s(v.settle_seconds)))
    if v.lookahead_seconds is None:
        # A session is final once the watermark passed its end plus the gap; one still open
        # holds the mark at its start, since it may yet grow.
        still_open = mine.where(F.col("session_end") >= F.lit(watermark - _s(v.settle_seconds)))
        [[first_open]] = still_open.agg(F.min(F.unix_micros(v.time_column))).collect()
        if first_open is not None:
            final_until = min(final_until, from_micros(first_open))
    return ViewResult(v.name, mine.count(), version, final_until)


def _record_run(
    spark: SparkSession, settings: Settings, run: BatchRun, started_at: datetime
) -> None:
    finished_at = datetime.now(UTC)
    rows = [
        {
            "run_id": run.run_id,
            "view": r.view,
            "interval_start": run.interval.start,
            "interval_end": run.interval.end,
            "final_until": r.final_until,
            "rows": r.rows,
            "table_version": r.table_version,
            "bronze_version": run.bronze_version,
            "ingest_high_water": run.ingest_high_water,
            "watermark": run.watermark,
            "events": run.events,
            "started_at": started_at,
            "finished_at": finished_at,
            "duration_seconds": run.seconds,
        }
        for r in run.views
    ]
    # Keyed by the run's identity: an Airflow retry of a run that got this far adds nothing.
    append_once(small_frame(spark, rows, RUNS), RUNS, settings, f"{BATCH}:{run.run_id}", 0)


def _handled_bound(name: str, moment: datetime) -> datetime:
    try:
        return handled(moment)
    except TimeRangeError as err:
        raise IntervalError(f"{name} {err}") from None


def _s(seconds: int) -> timedelta:
    return timedelta(seconds=seconds)


def _sql_ts(moment: datetime) -> str:
    return f"timestamp'{moment:%Y-%m-%d %H:%M:%S}'"
