"""Whether an interval's batch results would come out the same as its last run's: then a
second run of it (a scheduled run beside a triggered one, a retry, a backfill over hours done
already) is a no-op that says why, instead of the same recomputation again.

An interval's rows depend only on the accepted events within its reach (View: from `start -
lookback`; to `end + lookahead`, and for sessions, which grow forward, to the gap after the
last event of its latest session), and its final marks on the watermark. So the last run's
results stand when all of these hold:

- a run of exactly this interval is recorded in ops.batch_runs, with every view final up to
  the interval's end (more events can only move the watermark on);
- since the bronze version that run read, bronze was only appended to (compaction moves rows,
  it changes none; any other rewrite means recomputing);
- none of the records appended since (read with the Delta stream source, which skips
  compaction and fails on any other change) is an accepted event within the interval's reach. A
  later delivery of an event already in bronze never changes its first delivery (the earliest
  by arrival, lakehouse.batch.first_deliveries), and a record that validation refuses is in no
  view; counting them as changes would only recompute needlessly, never wrongly.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F

from lakehouse.core import small_tables
from lakehouse.core.delta_io import each_chunk_appended_after, read_table
from lakehouse.core.tables import table
from lakehouse.core.times import from_micros
from lakehouse.transforms.parse import parse_events
from lakehouse.transforms.validate import ValidationRules, accepted_events, validate_events
from lakehouse.transforms.views import VIEWS
from lakehouse.transforms.windows import SESSION_GAP_SECONDS

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from lakehouse.batch.recompute import Interval
    from lakehouse.core.config import Settings

RUNS = table("ops.batch_runs")
BRONZE = table("bronze.events_raw")
SESSIONS = table(VIEWS["user_sessions"].batch_table)


@dataclass(frozen=True)
class LastRun:
    run_id: str
    bronze_version: int
    final: bool  # every view final up to the interval's end


@dataclass(frozen=True)
class Unchanged:
    """The interval's last run stands: nothing appended to bronze since reaches it."""

    run_id: str
    bronze_from: int
    bronze_to: int
    appended: int  # records appended to bronze since, none of them within reach
    reach: tuple[datetime, datetime] | None = None  # what was read of them: None, nothing

    def __str__(self) -> str:
        since = (
            "bronze unchanged"
            if self.reach is None
            else f"{self.appended} records appended to bronze since (version "
            f"{self.bronze_from} -> {self.bronze_to}), none an event between "
            f"{self.reach[0]:%Y-%m-%dT%H:%M:%SZ} and {self.reach[1]:%Y-%m-%dT%H:%M:%SZ}"
        )
        return f"unchanged since run {self.run_id} ({since})"


def unchanged_since_last_run(
    spark: SparkSession, settings: Settings, interval: Interval
) -> Unchanged | None:
    """The interval's last run, if its results stand (module docstring); else None."""
    last = last_run_of(settings, interval)
    now = small_tables.table_version(settings, BRONZE)
    if last is None or not last.final or now is None:
        return None
    if now == last.bronze_version:
        return Unchanged(last.run_id, now, now, 0)
    reach = reach_of(spark, settings, interval)
    counted = appended_since(spark, settings, last.bronze_version, reach)
    if counted is None:
        return None
    appended, within_reach = counted
    if within_reach:
        return None
    return Unchanged(last.run_id, last.bronze_version, now, appended, reach)


def bronze_unchanged(settings: Settings, interval: Interval) -> Unchanged | None:
    """The interval's last run, if every view was final and bronze has had no commit since
    it: the common no-op (a retry, a scheduled run beside a triggered one), decided with
    delta-rs alone, so a job can answer it before it starts Spark."""
    last = last_run_of(settings, interval)
    if last is None or not last.final:
        return None
    if small_tables.table_version(settings, BRONZE) != last.bronze_version:
        return None
    return Unchanged(last.run_id, last.bronze_version, last.bronze_version, 0)


def last_run_of(settings: Settings, interval: Interval) -> LastRun | None:
    """The latest recorded run of exactly `interval` (all views), if any: ops.batch_runs read
    with delta-rs (a row per run and view; the revenue view's rows, lakehouse.joins.batch, are
    a run of their own)."""
    import pyarrow.compute as pc

    exactly = (
        (pc.field("interval_start") == interval.start)
        & (pc.field("interval_end") == interval.end)
        & pc.field("view").isin(list(VIEWS))
    )
    views: dict[str, list[dict[str, Any]]] = {}
    for row in small_tables.table_rows(settings, RUNS, exactly):
        views.setdefault(row["run_id"], []).append(row)
    complete = [rows for rows in views.values() if len({r["view"] for r in rows}) == len(VIEWS)]
    if not complete:
        return None
    run = max(complete, key=lambda rows: max(r["finished_at"] for r in rows))
    final = min(r["final_until"] for r in run) >= interval.end
    return LastRun(run[0]["run_id"], max(int(r["bronze_version"]) for r in run), final)


def reach_of(
    spark: SparkSession, settings: Settings, interval: Interval
) -> tuple[datetime, datetime]:
    """[first, last] event time an event must have to change the interval's rows."""
    first = interval.start - timedelta(seconds=max(v.lookback_seconds for v in VIEWS.values()))
    ahead = max(v.lookahead_seconds or 0 for v in VIEWS.values())
    last = interval.end + timedelta(seconds=ahead)
    sessions = read_table(spark, SESSIONS, settings).where(
        interval.condition(VIEWS["user_sessions"].time_column)
    )
    [[latest_end]] = sessions.agg(F.max(F.unix_micros("session_end"))).collect()
    if latest_end is not None:
        last = max(last, from_micros(latest_end) + timedelta(seconds=SESSION_GAP_SECONDS))
    return first, last


def appended_since(
    spark: SparkSession, settings: Settings, version: int, reach: tuple[datetime, datetime]
) -> tuple[int, int] | None:
    """(records appended to bronze after `version`, accepted events among them within
    `reach`), or None when bronze was changed otherwise (a rewrite, a delete) or its log no
    longer holds `version`'s successors."""
    rules = ValidationRules.of(settings)
    counted = [0, 0]

    def count(rows: DataFrame, _chunk_id: int) -> None:
        accepted = (
            rows.transform(parse_events)
            .transform(validate_events, rules)
            .transform(accepted_events)
            .where(F.col("event_time").between(F.lit(reach[0]), F.lit(reach[1])))
        )
        counted[0] += rows.count()
        counted[1] += accepted.count()

    if not each_chunk_appended_after(spark, BRONZE, settings, version, count):
        return None
    return counted[0], counted[1]
