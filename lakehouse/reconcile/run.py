"""One reconciliation run: every view of two sources compared, summarised for people.

The comparison of each view is computed once and kept (persisted) while the summary, the
first differing windows, the chart series and the dq records are read from it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from pyspark import StorageLevel
from pyspark.sql import functions as F

from lakehouse.core.config import Settings
from lakehouse.core.times import EPOCH, from_micros
from lakehouse.reconcile.compare import (
    EQUAL,
    EXPLAINED,
    OPEN,
    STATUSES,
    UNEXPLAINED,
    Range,
    compare_view,
    rule_for,
)
from lakehouse.reconcile.sources import Side, Source, bound_to_common_log, load_sides
from lakehouse.serving.serve import merge_ranges
from lakehouse.transforms.views import View, view

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

FAR_FUTURE = datetime(9999, 1, 1, tzinfo=EPOCH.tzinfo)
SAMPLE_ROWS = 50  # differing windows kept per status for the report and the terminal
CHART_POINTS = 400  # at most this many points per chart line


@dataclass(frozen=True)
class SeriesPoint:
    time: datetime  # bucket start
    left: float
    right: float
    unexplained: int  # unexplained windows in the bucket


@dataclass
class ViewComparison:
    view: str
    keys: tuple[str, ...]
    time_column: str
    metrics: tuple[str, ...]
    counts: dict[str, int]  # per status, and "beyond_threshold"
    unexplained: list[dict[str, Any]] = field(default_factory=list)  # worst first
    explained: list[dict[str, Any]] = field(default_factory=list)
    series: list[SeriesPoint] = field(default_factory=list)
    bucket_seconds: int = 60
    note: str | None = None  # why nothing could be compared, if so
    result: DataFrame | None = None  # the per-key comparison (persisted while the run lives)

    @property
    def compared(self) -> int:
        return sum(self.counts[s] for s in (EQUAL, EXPLAINED, UNEXPLAINED))

    @property
    def beyond_threshold(self) -> int:
        return self.counts["beyond_threshold"]


@dataclass
class Reconciliation:
    run_id: str
    left: str
    right: str
    started_at: datetime
    scope: tuple[datetime | None, datetime | None]  # what was asked: the hull of `ranges`
    ranges: list[Range]  # the ranges compared (several: the intervals of several batch runs)
    thresholds: dict[str, float]
    max_unexplained_windows: int
    views: list[ViewComparison]

    @property
    def compared(self) -> int:
        return sum(v.compared for v in self.views)

    def release(self) -> None:
        for v in self.views:
            if v.result is not None:
                v.result.unpersist()


def reconcile(
    spark: SparkSession,
    settings: Settings,
    left: Source,
    right: Source,
    views: Sequence[str],
    run_id: str,
    started_at: datetime,
    start: datetime | None = None,
    end: datetime | None = None,
    ranges: Sequence[Range] | None = None,
) -> Reconciliation:
    """Compare `views` of two sources for keys placed in [start, end), or in `ranges`;
    call release() after."""
    thresholds = dict(settings.dq.thresholds)
    scope = merge_ranges(list(ranges)) if ranges else [(start or EPOCH, end or FAR_FUTURE)]
    if ranges:
        start, end = scope[0][0], scope[-1][1]
    chosen = [view(name) for name in views]
    lefts, rights = bound_to_common_log(
        spark,
        settings,
        load_sides(spark, settings, left, chosen),
        load_sides(spark, settings, right, chosen),
    )
    compared = [
        compare_one(spark, lefts[v.name], rights[v.name], v, thresholds, scope) for v in chosen
    ]
    return Reconciliation(
        run_id=run_id,
        left=left.name,
        right=right.name,
        started_at=started_at,
        scope=(start, end),
        ranges=scope,
        thresholds=thresholds,
        max_unexplained_windows=settings.dq.max_unexplained_windows,
        views=compared,
    )


def compare_one(
    spark: SparkSession,
    left: Side,
    right: Side,
    v: View,
    thresholds: dict[str, float],
    scope: list[Range],
) -> ViewComparison:
    rule = rule_for(v)
    empty = {**dict.fromkeys(STATUSES, 0), "beyond_threshold": 0}
    absent = [s.source.tables[v.name].name for s in (left, right) if s.rows is None]
    if left.rows is None or right.rows is None:
        return ViewComparison(
            v.name,
            v.keys,
            v.time_column,
            rule.metrics,
            empty,
            note=f"{', '.join(absent)}: no table yet",
        )
    result = compare_view(
        left.rows,
        right.rows,
        v,
        thresholds,
        left_missing=left.missing,
        right_missing=right.missing,
        closed=intersect(left.closed, right.closed),
        left_open=left.still_open,
        right_open=right.still_open,
        scope=scope,
        names=(left.source.name, right.source.name),
    ).persist(StorageLevel.MEMORY_AND_DISK)
    time = F.col(v.time_column)
    [summary] = result.agg(
        *(F.count_if(F.col("status") == s).alias(s) for s in STATUSES),
        F.count_if("beyond_threshold").alias("beyond_threshold"),
        F.min(F.when(F.col("status") != OPEN, F.unix_micros(time))).alias("first"),
        F.max(F.when(F.col("status") != OPEN, F.unix_micros(time))).alias("last"),
    ).collect()
    counts = {k: int(summary[k]) for k in (*STATUSES, "beyond_threshold")}
    comparison = ViewComparison(v.name, v.keys, v.time_column, rule.metrics, counts, result=result)
    if counts[UNEXPLAINED]:
        worst_first = [F.col("beyond_threshold").desc(), time, *v.keys]
        comparison.unexplained = _first_rows(result, UNEXPLAINED, v, worst_first)
    if counts[EXPLAINED]:
        comparison.explained = _first_rows(result, EXPLAINED, v, [time, *v.keys])
    if summary["first"] is not None:
        first, last = from_micros(summary["first"]), from_micros(summary["last"])
        comparison.bucket_seconds = bucket_seconds(first, last)
        comparison.series = _series(result, v, comparison.bucket_seconds)
    if not comparison.compared:
        comparison.note = "nothing final on both sides in the range"
    return comparison


def intersect(a: Sequence[Range], b: Sequence[Range]) -> list[Range]:
    """The instants in both sorted lists of non-overlapping ranges."""
    out: list[Range] = []
    for a_start, a_end in a:
        for b_start, b_end in b:
            start, end = max(a_start, b_start), min(a_end, b_end)
            if start < end:
                out.append((start, end))
    return sorted(out)


def bucket_seconds(first: datetime, last: datetime) -> int:
    """A whole number of minutes that keeps a chart under CHART_POINTS points."""
    span = (last - first).total_seconds()
    minutes = max(1, int(span // (60 * CHART_POINTS)) + 1)
    return minutes * 60


def _first_rows(result: DataFrame, status: str, v: View, order: list[Any]) -> list[dict[str, Any]]:
    rows = (
        result.where(F.col("status") == status)
        .orderBy(*order)
        .limit(SAMPLE_ROWS)
        .withColumns({c: F.unix_micros(c) for c in _time_columns(result, v)})
        .collect()
    )
    times = _time_columns(result, v)
    return [
        {k: (from_micros(x) if k in times and x is not None else x) for k, x in r.asDict().items()}
        for r in rows
    ]


def _time_columns(result: DataFrame, v: View) -> list[str]:
    return [c for c, t in result.dtypes if t == "timestamp" and c in v.keys]


def _series(result: DataFrame, v: View, bucket: int) -> list[SeriesPoint]:
    bucket_start = F.floor(F.unix_micros(v.time_column) / (bucket * 1_000_000)) * bucket
    rows = (
        result.where(F.col("status") != OPEN)
        .groupBy(bucket_start.alias("bucket"))
        .agg(
            F.sum(F.coalesce("left_events", F.lit(0))).alias("left"),
            F.sum(F.coalesce("right_events", F.lit(0))).alias("right"),
            F.count_if(F.col("status") == UNEXPLAINED).alias("unexplained"),
        )
        .orderBy("bucket")
        .collect()
    )
    return [
        SeriesPoint(
            EPOCH + timedelta(seconds=int(r["bucket"])),
            float(r["left"]),
            float(r["right"]),
            int(r["unexplained"]),
        )
        for r in rows
    ]
