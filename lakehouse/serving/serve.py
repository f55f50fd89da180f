"""The serving layer: one answer per view, batch where the batch has covered, speed after.

A view's row is served from batch.<view> when its time (window_start, session_start) is in
the batch coverage, else from speed.<view>. The coverage is the union of the recorded batch
runs' [interval_start, final_until): rows the batch recomputed and that can no longer change,
where a later run of an interval replaces what earlier runs made final in it (`coverage_of`).
Each row is placed by one instant, so no row is counted on both sides of the seam.

A consistent read while the batch layer writes: the coverage and the batch table's version
both come from one snapshot of ops.batch_runs, and the batch table is read at that version
(time travel). Rows a batch run is writing right now are not in that version, and its run
record, written last, is not in that snapshot either.

In kappa mode there is no batch layer: the corrected side is the replay version that
ops.serving_pointer makes active (lakehouse.replay.versions), as of its last passed gate (its
pins), covering from its first window up to its watermark then; promotion, rollback and a
checked extension switch that pointer in one commit.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import reduce
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from lakehouse.core.config import Settings
from lakehouse.core.delta_io import read_table, read_table_at, table_exists
from lakehouse.core.tables import Table, table
from lakehouse.core.times import from_micros
from lakehouse.joins.batch import VIEW as REVENUE_VIEW
from lakehouse.replay.versions import LIVE
from lakehouse.transforms.views import VIEWS, View, view

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from lakehouse.speed.outputs import SpeedOutputs

RUNS = table("ops.batch_runs")
# The click-stream views, and the enrichment's revenue view (lakehouse.joins), each served
# batch where the batch has covered and speed after.
SERVED_VIEWS = (*VIEWS, REVENUE_VIEW)

Range = tuple[datetime, datetime]


@dataclass(frozen=True)
class Coverage:
    """What the batch layer has made final for one view, as of one ops.batch_runs snapshot."""

    ranges: list[Range]
    table_version: int | None  # the batch table version that holds those rows
    side: str = "batch"  # or, in kappa mode, the active replay version's name, or "live"

    @property
    def high_water(self) -> datetime | None:
        return self.ranges[-1][1] if self.ranges else None

    def seam(self) -> str:
        """Where the corrected side's results end and speed results begin, in words."""
        if self.high_water is None:
            if self.side == "batch":
                return "no batch run yet: all speed results"
            if self.side == LIVE:
                return "no replay version is active: all speed results"
            return f"nothing {self.side} covers yet: all speed results"
        until = f"{self.high_water:%Y-%m-%d %H:%M:%S}Z"
        if self.side != "batch":
            return f"{self.side} results up to {until}, speed results after"
        return (
            f"batch results up to {until} (batch version {self.table_version}), speed results after"
        )

    def contains(self, column: str) -> Column:
        tests = [
            (F.col(column) >= F.lit(start)) & (F.col(column) < F.lit(end))
            for start, end in self.ranges
        ]
        return reduce(lambda a, b: a | b, tests, F.lit(False))


def merge_ranges(ranges: list[Range]) -> list[Range]:
    """Sorted, non-overlapping ranges covering the same instants; empty ones dropped."""
    merged: list[Range] = []
    for start, end in sorted(r for r in ranges if r[0] < r[1]):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


@dataclass(frozen=True)
class RunCoverage:
    """One recorded batch run of a view: the interval it rewrote, and how much of it is final."""

    start: datetime
    end: datetime
    final_until: datetime
    table_version: int  # the batch table version it wrote: later runs wrote later versions


def coverage_of(runs: list[RunCoverage]) -> list[Range]:
    """The instants the batch table holds final rows for, as of the newest of `runs`.

    A run rewrites all of its interval's rows, so what an earlier run made final there is
    gone with them. A rerun can make less final than the run it replaced (a late event joined
    a closed session to one still open): counting the earlier run's range too would serve that
    open session from the batch and its later part again from the speed layer.
    """
    covered: list[Range] = []
    for run in sorted(runs, key=lambda r: r.table_version):
        # Merged at each step, so the list stays as short as the gaps in the coverage.
        covered = merge_ranges([*outside(covered, run), (run.start, run.final_until)])
    return covered


def outside(ranges: list[Range], run: RunCoverage) -> list[Range]:
    """The parts of `ranges` outside the interval `run` rewrote."""
    return [
        piece
        for start, end in ranges
        for piece in ((start, min(end, run.start)), (max(start, run.end), end))
        if piece[0] < piece[1]  # else the list doubled with every run
    ]


def batch_coverage(spark: SparkSession, settings: Settings, view_name: str) -> Coverage:
    """What the batch layer's recorded runs of `view_name` made final (coverage_of)."""
    if not table_exists(spark, RUNS, settings):
        return Coverage([], None)
    runs = [
        RunCoverage(
            from_micros(r["start"]), from_micros(r["end"]), from_micros(r["until"]), r["version"]
        )
        for r in read_table(spark, RUNS, settings)
        .where(F.col("view") == view_name)
        .select(
            F.unix_micros("interval_start").alias("start"),
            F.unix_micros("interval_end").alias("end"),
            F.unix_micros("final_until").alias("until"),
            F.col("table_version").alias("version"),
        )
        .collect()
    ]
    if not runs:
        return Coverage([], None)
    return Coverage(coverage_of(runs), max(r.table_version for r in runs))


@dataclass(frozen=True)
class CorrectedSide:
    """Where final, complete results come from: the batch layer (lambda) or the promoted
    replay version (kappa), and the instants they cover."""

    name: str  # "batch" or "replay_<version>"
    rows: DataFrame | None
    coverage: Coverage


def corrected_side(spark: SparkSession, settings: Settings, v: View, mode: str) -> CorrectedSide:
    if mode == "lambda":
        coverage = batch_coverage(spark, settings, v.name)
        rows = read_table_at(spark, table(v.batch_table), settings, coverage.table_version)
        return CorrectedSide("batch", rows, coverage)
    from lakehouse.replay.versions import outputs_of, served_version

    active, pins = served_version(settings)
    if active == LIVE:
        return CorrectedSide(LIVE, None, Coverage([], None, LIVE))
    outputs = outputs_of(active)
    # The watermark first: rows final under it cannot change while they are read.
    watermark = checked_watermark(spark, settings, outputs, pins)
    rows = as_checked(spark, settings, pins, v.name, outputs.view_table(v.name))
    if rows is None:
        return CorrectedSide(outputs.name, None, Coverage([], None, outputs.name))
    settle = timedelta(seconds=v.settle_seconds)
    return CorrectedSide(
        outputs.name, rows, covered_until(rows, outputs.name, v.time_column, watermark, settle)
    )


def as_checked(
    spark: SparkSession, settings: Settings, pins: dict[str, int] | None, name: str, t: Table
) -> DataFrame | None:
    """`t`, pinned as `name`, as of its version's last passed gate (the latest for a version
    promoted before pins); None while it does not exist."""
    if pins is None:
        return read_table(spark, t, settings) if table_exists(spark, t, settings) else None
    return read_table_at(spark, t, settings, pins.get(name))


def checked_watermark(
    spark: SparkSession, settings: Settings, outputs: SpeedOutputs, pins: dict[str, int] | None
) -> datetime | None:
    """A replay version's watermark as of its last passed gate (None before its first batch)."""
    progress = as_checked(spark, settings, pins, "progress", outputs.progress)
    if progress is None:
        return None
    [[watermark]] = progress.agg(F.max("watermark_micros")).collect()
    return None if watermark is None else from_micros(watermark)


def covered_until(
    rows: DataFrame, side: str, time_column: str, watermark: datetime | None, settle: timedelta
) -> Coverage:
    """A replay version's (`side`) coverage of its rows: from its first to `settle` before its
    watermark, where nothing it has not read yet can change them."""
    [[first]] = rows.agg(F.min(F.unix_micros(time_column))).collect()
    if watermark is None or first is None:
        return Coverage([], None, side)
    return Coverage(merge_ranges([(from_micros(first), watermark - settle)]), None, side)


def serve(
    spark: SparkSession,
    settings: Settings,
    view_name: str,
    start: datetime | None = None,
    end: datetime | None = None,
    mode: str | None = None,
) -> tuple[DataFrame, Coverage]:
    """The view's rows with time in [start, end), each from the side that owns it, with a
    `source` column: the corrected side ('batch', or the promoted 'replay_<version>' in
    kappa mode) where it covers, the live speed layer ('speed') elsewhere."""
    if view_name == REVENUE_VIEW:  # the enrichment's view, served alike (serving.revenue)
        from lakehouse.serving.revenue import serve_revenue

        return serve_revenue(spark, settings, start, end, mode or settings.mode)
    v = view(view_name)
    corrected = corrected_side(spark, settings, v, mode or settings.mode)
    coverage = corrected.coverage
    speed = table(v.speed_table)
    parts = []
    if corrected.rows is not None:
        parts.append(
            corrected.rows.where(coverage.contains(v.time_column)).withColumn(
                "source", F.lit(corrected.name)
            )
        )
    if table_exists(spark, speed, settings):
        fresh = read_table(spark, speed, settings).where(~coverage.contains(v.time_column))
        parts.append(fresh.withColumn("source", F.lit("speed")))
    if not parts:
        raise NoServingDataError(
            f"nothing to serve for {v.name}: neither {corrected.name} nor {speed.name} has "
            "results yet (run the speed layer)"
        )
    return in_range(parts, v.time_column, start, end), coverage


def in_range(
    parts: list[DataFrame], time_column: str, start: datetime | None, end: datetime | None
) -> DataFrame:
    """The rows of every part whose `time_column` is in [start, end) (None: unbounded)."""
    served = reduce(lambda a, b: a.unionByName(b), parts)
    if start is not None:
        served = served.where(F.col(time_column) >= F.lit(start))
    if end is not None:
        served = served.where(F.col(time_column) < F.lit(end))
    return served


class NoServingDataError(Exception):
    """Neither side of a view exists yet."""


def row_order(view_name: str) -> tuple[str, ...]:
    """The columns a served view's rows are shown in the order of: its time, then its keys."""
    if view_name == REVENUE_VIEW:
        return ("window_start", "segment", "category")
    v = view(view_name)
    return (v.time_column, *v.keys)


def register_serving_views(spark: SparkSession, settings: Settings) -> tuple[list[str], list[str]]:
    """Spark SQL temporary views `serving_<view>`, e.g.
    SELECT * FROM serving_event_counts_1m WHERE window_start >= '2026-11-25 10:00'.
    Returns the names registered, and the views not registered because nothing serves them yet.
    """
    names, missing = [], []
    for name in SERVED_VIEWS:
        try:
            served, _ = serve(spark, settings, name)
        except NoServingDataError:
            missing.append(name)
            continue
        served.createOrReplaceTempView(f"serving_{name}")
        names.append(f"serving_{name}")
    return names, missing
