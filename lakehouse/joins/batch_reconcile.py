"""The batch layer's revenue view against the stream's, window by window.

batch.revenue_by_segment holds, for the windows its runs made final, the revenue of the events
each run read from bronze, enriched with the history versions the run joined (on each row).
The enrichment stream holds, as of its last completed batch, the revenue of the events it has
enriched, with its batch's pinned history versions. For a run's windows both must be equal
when, and only when, both sides saw the same inputs:

- the same history versions: else the windows are *open* (a rerun of the interval, or the
  stream's next batch, joins the same versions);
- the same events: the events the run read are bronze's records up to its version, per Kafka
  partition; the stream's are silver's events it has enriched. When the speed layer's position
  at the silver version the stream's last batch pinned has not passed the run's records, or
  an event the run read (a purchase in its windows) is not enriched yet, the run's windows
  are open too.

Every other window of the run is compared: the stream's rows are summed from its enriched
events among those the run read (an event that reached bronze after the run counts on neither
side), and any difference is a fault of one side.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from lakehouse.batch.recompute import BRONZE, RUNS
from lakehouse.core.config import Settings
from lakehouse.core.delta_io import read_table, read_table_at, table_exists
from lakehouse.core.tables import table
from lakehouse.core.times import from_micros
from lakehouse.joins.batch import REVENUE, TIME_COLUMN, VIEW
from lakehouse.joins.corrections import latest_rows
from lakehouse.joins.dimensions import DIMENSIONS
from lakehouse.joins.enrichment import SILVER_PIN, Pins, pins_of
from lakehouse.joins.outputs import EnrichmentOutputs
from lakehouse.joins.reconcile import NothingToReconcile, compare, last_batch
from lakehouse.serving.serve import Range, RunCoverage, outside
from lakehouse.transforms.enrichment import (
    PURCHASE,
    VIEW_KEYS,
    VIEW_MEASURES,
    WINDOW,
    revenue_by_segment,
)

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

SPEED_PROGRESS = table("ops.speed_progress")
SILVER = table("silver.events")


@dataclass(frozen=True)
class RevenueRun:
    """A recorded batch run of the revenue view and the windows of it still standing."""

    coverage: RunCoverage
    bronze_version: int
    owned: list[Range]  # final, and not replaced by a later run


@dataclass(frozen=True)
class BatchRevenueReconciliation:
    batch_id: int  # the stream's last completed batch
    compared: int  # windows either side has, in the runs' compared windows
    differing: int
    open: int  # batch windows not compared: the sides saw other inputs (`reasons`)
    examples: list[str] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)


def standing_runs(spark: SparkSession, settings: Settings) -> list[RevenueRun]:
    """The revenue view's recorded runs, each with the final ranges no later run replaced."""
    if not table_exists(spark, RUNS, settings):
        return []
    recorded = (
        read_table(spark, RUNS, settings)
        .where(F.col("view") == VIEW)
        .select(
            F.unix_micros("interval_start").alias("start"),
            F.unix_micros("interval_end").alias("end"),
            F.unix_micros("final_until").alias("until"),
            "table_version",
            "bronze_version",
        )
        .collect()
    )
    runs = [
        (
            RunCoverage(
                from_micros(r["start"]),
                from_micros(r["end"]),
                from_micros(r["until"]),
                int(r["table_version"]),
            ),
            int(r["bronze_version"]),
        )
        for r in recorded
    ]
    runs.sort(key=lambda run: run[0].table_version)  # later runs wrote later versions
    standing = []
    for i, (run, bronze_version) in enumerate(runs):
        owned = [(run.start, run.final_until)] if run.start < run.final_until else []
        for later, _ in runs[i + 1 :]:  # a later run rewrote its whole interval
            owned = outside(owned, later)
        if owned:
            standing.append(RevenueRun(run, bronze_version, owned))
    return standing


def reconcile_batch_revenue(spark: SparkSession, settings: Settings) -> BatchRevenueReconciliation:
    """The batch layer's final revenue windows against the live stream's (module docstring);
    NothingToReconcile before the stream's first batch or the batch layer's first run."""
    outputs = EnrichmentOutputs.live()
    last = last_batch(spark, settings, outputs.progress)
    runs = standing_runs(spark, settings)
    if last is None or not runs:
        raise NothingToReconcile(
            "the enrichment stream has completed no batch yet"
            if last is None
            else f"the batch layer has made no window of {VIEW} final yet"
        )
    app, batch_id = last
    pins = pins_of(spark, settings, app, batch_id, outputs.pins)
    assert pins is not None, "a completed batch recorded its pins first"
    enriched = latest_rows(
        read_table(spark, outputs.enriched, settings).where(F.col("enriched_batch") <= batch_id)
    ).localCheckpoint()
    read_to = stream_position(spark, settings, pins.get(SILVER_PIN))
    compared = differing = still_open = 0
    examples: list[str] = []
    reasons: list[str] = []
    for run in runs:
        batch = read_table_at(spark, REVENUE, settings, run.coverage.table_version)
        assert batch is not None
        mine = batch.where(_in_ranges(TIME_COLUMN, run.owned)).localCheckpoint()
        last_offsets = _bronze_offsets(spark, settings, run.bronze_version)
        events = _events_read(spark, settings, run, last_offsets)
        why = _not_comparable(mine, pins, read_to, last_offsets)
        if why is None:
            purchases = events.where(F.col("event_type") == PURCHASE)
            if unread := purchases.join(enriched, "event_id", "left_anti").count():
                why = f"{unread} purchases it read are not enriched by the stream yet"
        if why is not None:
            still_open += mine.count()
            reasons.append(f"{_named(run)}: {why}")
            continue
        read = events.select("event_id")
        stream = revenue_by_segment(enriched.join(read, "event_id", "left_semi"))
        found = compare(
            mine.select(*VIEW_KEYS, *VIEW_MEASURES),
            stream.where(_in_ranges(TIME_COLUMN, run.owned)),
            VIEW_KEYS,
            VIEW_MEASURES,
        )
        compared, differing = compared + found.compared, differing + found.differing
        examples += [f"{_named(run)}: {e}" for e in found.examples]
    return BatchRevenueReconciliation(
        batch_id, compared, differing, still_open, examples[:5], reasons
    )


def stream_position(
    spark: SparkSession, settings: Settings, silver_version: int | None
) -> dict[int, int]:
    """Per Kafka partition, the next offset the speed layer had to read when it wrote
    `silver_version` of silver.events (its newest progress row at or before it)."""
    if silver_version is None or not table_exists(spark, SPEED_PROGRESS, settings):
        return {}
    rows = (
        read_table(spark, SPEED_PROGRESS, settings)
        .where(F.col("silver_version") <= silver_version)
        .orderBy(F.desc("silver_version"), F.desc("processed_at"))
        .select("offsets")
        .limit(1)
        .collect()
    )
    return dict(rows[0]["offsets"] or {}) if rows else {}


def _not_comparable(
    rows: DataFrame, pins: Pins, read_to: dict[int, int], last_offsets: dict[int, int]
) -> str | None:
    """Why a run's windows (`rows`) cannot be held to the stream's batch (`pins`): other
    history versions, or a speed layer that had not read as far as the run (`read_to`: the
    next offset it was to read per partition; `last_offsets`: the run's last), or None."""
    joined = rows.select(*(f"{name}_version" for name in DIMENSIONS)).distinct().collect()
    stream_pins = {name: pins.get(name) for name in DIMENSIONS}
    for row in joined:
        batch_pins = {name: row[f"{name}_version"] for name in DIMENSIONS}
        if batch_pins != stream_pins:
            return (
                f"joined other history versions ({_versions(batch_pins)}) than the stream's "
                f"batch ({_versions(stream_pins)})"
            )
    behind = sorted(p for p, last in last_offsets.items() if read_to.get(p, 0) <= last)
    if behind:
        return f"the speed layer had not read partitions {behind} as far as the run"
    return None


def _events_read(
    spark: SparkSession, settings: Settings, run: RevenueRun, last_offsets: dict[int, int]
) -> DataFrame:
    """silver's events in the run's windows that the run read from bronze (each Kafka
    partition's records up to `last_offsets`): their ids and types."""
    read: Column = F.lit(False)
    for partition, offset in last_offsets.items():
        read = read | ((F.col("kafka_partition") == partition) & (F.col("kafka_offset") <= offset))
    starts = F.window("event_time", WINDOW)["start"]
    events = read_table(spark, SILVER, settings).where(read & _in_ranges(starts, run.owned))
    return events.select("event_id", "event_type").localCheckpoint()


def _bronze_offsets(spark: SparkSession, settings: Settings, version: int) -> dict[int, int]:
    raw = read_table_at(spark, BRONZE, settings, version)
    assert raw is not None
    found = raw.groupBy("partition").agg(F.max("offset").alias("last")).collect()
    return {int(r["partition"]): int(r["last"]) for r in found}


def _in_ranges(column: str | Column, ranges: list[Range]) -> Column:
    at = F.col(column) if isinstance(column, str) else column
    test: Column = F.lit(False)
    for start, end in ranges:
        test = test | ((at >= F.lit(start)) & (at < F.lit(end)))
    return test


def _named(run: RevenueRun) -> str:
    c = run.coverage
    interval = f"[{c.start:%Y-%m-%dT%H:%MZ}, {c.end:%Y-%m-%dT%H:%MZ})"
    return f"run of {interval} (version {c.table_version})"


def _versions(pins: dict[str, int | None]) -> str:
    return ", ".join(f"{name} {'none' if v is None else v}" for name, v in pins.items())
