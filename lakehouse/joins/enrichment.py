"""What the enrichment stream does with one micro-batch of silver events (foreachBatch).

    ops.enrichment_pins       <- the history tables' versions the batch joins with (first)
    silver.events_enriched    <- the batch's events enriched as of their event time, and a
                                 new row for each earlier event a dimension change re-enriched
    speed.revenue_by_segment  <- the batch's partial rows of the view, corrections included
    ops.enrichment_progress   <- one row: events, corrections, versions (written last)

After batch N, the latest row of every event the stream has read is its enrichment with the
history tables at batch N's pins, and the view's partial rows up to batch N add up to the
view of those rows. A dimension change that reaches the history after events it bears on
(the changelog runs behind the click stream) is so corrected in the next batch, and the
correction is recorded: the event's new row is `corrected`, and the view's partial rows take
its old contribution out.

Exactly-once: every write is marked with (this stream's writer id, batch id)
(delta_io.append_batch), and a retried batch decides as its first try did: it joins with the
pins its first try recorded, and reads the events' earlier rows from batches before its own.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from lakehouse.cdc.changelog import history_table
from lakehouse.core.checkpoints import checkpoint_query_id
from lakehouse.core.config import Settings
from lakehouse.core.delta_io import (
    append_arrow_batch,
    append_rows_batch,
    append_small_batch,
    read_table,
    table_exists,
)
from lakehouse.core.frames import checkpoint_measured, collect_few
from lakehouse.core.small_tables import table_version as latest_version
from lakehouse.core.spark import release_local_checkpoint
from lakehouse.core.tables import hour_value
from lakehouse.core.times import to_micros
from lakehouse.joins import corrections_arrow
from lakehouse.joins.corrections import (
    Changed,
    Correction,
    earlier_rows,
    latest_rows,
    measured_starts,
)
from lakehouse.joins.dimensions import (
    DIMENSIONS,
    Known,
    history_at,
    history_frame,
    history_rows,
)
from lakehouse.joins.outputs import EnrichmentOutputs
from lakehouse.transforms.as_of import timeline
from lakehouse.transforms.enrichment import (
    ENRICHED_COLUMNS,
    STARTS_SCHEMA,
    affected_events,
    change_starts_of_rows,
    corrected_of,
    enrich_by_timelines,
    enrich_of_rows,
    net_of_rows,
    net_rows,
    partials_of,
    revenue_by_segment,
    revenue_of_rows,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from lakehouse.core.tables import Table

LIVE = EnrichmentOutputs.live()
ENRICHED, REVENUE, PINS, PROGRESS = LIVE.enriched, LIVE.revenue, LIVE.pins, LIVE.progress
EVENT_COLUMNS = ("event_id", "event_type", "user_id", "product_id", "amount", "event_time")
ROW_COLUMNS = (*EVENT_COLUMNS, "event_date", *ENRICHED_COLUMNS)

# captured table -> its history's version (None: none yet), and SILVER_PIN -> the version of
# silver.events when the batch pinned (the newest it can have read: the supervisor's lag).
Pins = Mapping[str, int | None]
# Each dimension's history at the batch's pins.
Pinned = Mapping[str, Known]
SILVER_PIN = "silver"


class EnrichmentProcessor:
    """The enrichment stream's foreachBatch: one instance per query start."""

    def __init__(
        self, settings: Settings, checkpoint: str, outputs: EnrichmentOutputs = LIVE
    ) -> None:
        self.settings = settings
        self.checkpoint = checkpoint
        self.outputs = outputs
        self._app_id: str | None = None
        # As the changelog stream's: the batch after the last one committed here, unless begun.
        self._next: int | None = None
        self._begun: int | None = None
        # The pins of the batch this processor committed last, and the history it joined
        # (small, read once per version rather than once per batch).
        self._pinned: tuple[int, Pins] | None = None
        self._histories: dict[tuple[str, int | None], Known] = {}
        # Each dimension's history at the version before, which the batch after a change
        # compares the new one with (corrections), as it was read and checkpointed then.
        self._previous: dict[str, tuple[int | None, Known]] = {}

    def app_id(self, spark: SparkSession) -> str:
        if self._app_id is None:
            query_id = checkpoint_query_id(spark, self.checkpoint)
            self._app_id = f"{self.outputs.writer}:{query_id}"
        return self._app_id

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        started = time.monotonic()
        spark = batch.sparkSession
        app = self.app_id(spark)
        untried = self._next == batch_id and self._begun != batch_id
        self._begun = batch_id
        held: list[DataFrame] = []
        # The pins are committed while the batch is joined, and before any output is written.
        with ThreadPoolExecutor(1) as pool:
            pins, recorded = self.pin(spark, app, batch_id, untried, pool)
            histories = {name: self.history(spark, name, pins.get(name)) for name in DIMENSIONS}
            try:
                events = batch.select(*EVENT_COLUMNS, "event_date")  # read once, below
                self.write(
                    spark,
                    app,
                    batch_id,
                    untried,
                    (pins, recorded),
                    histories,
                    events,
                    held,
                    started,
                )
            finally:
                # Spark keeps a local checkpoint's blocks until its JVM collects them.
                for frame in held:
                    release_local_checkpoint(frame)
        self._next = batch_id + 1
        self._pinned = (batch_id, pins)

    def write(
        self,
        spark: SparkSession,
        app: str,
        batch_id: int,
        untried: bool,
        pinned: tuple[Pins, Future[None]],
        histories: Pinned,
        events: DataFrame,
        held: list[DataFrame],
        started: float,
    ) -> None:
        """The batch's enriched rows, corrections, partial rows and progress row; the outputs
        once the pins are recorded (`pinned`: the pins, and their commit)."""
        pins, recorded = pinned
        changes = self.corrections(spark, app, batch_id, pins, histories, held)
        if untried:
            few = self.rows_on_driver(spark, events, changes, histories)
            if few is not None:
                self.write_from_driver(spark, app, batch_id, pins, few, recorded, started)
                return
        # The join keeps every column of the events, event_date among them. Each event once.
        fresh, events_count, events_bytes = checkpoint_measured(enrich_as_pinned(events, histories))
        held.append(fresh)
        rows = self.stamped(fresh, batch_id, False)
        partials = revenue_by_segment(fresh)
        corrected_count = corrected_bytes = 0
        if changes is not None:
            # Enriched again once: both the corrected rows and the partial rows come from it.
            before = self.before_frame(spark, changes)
            net = net_rows(before, enriched_again(before, histories)).localCheckpoint()
            corrected, corrected_count, corrected_bytes = checkpoint_measured(corrected_of(net))
            held += [net, corrected]
            rows = rows.unionByName(self.stamped(corrected, batch_id, True))
            partials = partials.unionByName(partials_of(net))
        settings, out = self.settings, self.outputs
        recorded.result()  # a batch whose pins failed to commit writes nothing
        partials = partials.withColumn("batch_id", F.lit(batch_id).cast("bigint"))
        # Each append is mostly planning and committing on the driver, one core's work: side
        # by side they finish sooner, as the speed layer's writes. A batch's few rows are
        # committed by delta-rs (delta_io.append_small_batch). The progress row, which says
        # the batch is done, comes after both.
        with ThreadPoolExecutor(2) as pool:
            appends = [
                pool.submit(
                    append_small_batch,
                    *(rows, out.enriched, settings, app, batch_id, untried),
                    rows=events_count + corrected_count,
                    size_bytes=events_bytes + corrected_bytes,
                ),
                pool.submit(
                    append_small_batch, partials, out.revenue, settings, app, batch_id, untried
                ),
            ]
            for done in appends:
                done.result()  # a failed append fails the batch
        self.write_progress(
            spark, app, batch_id, untried, pins, (events_count, corrected_count), started
        )

    def rows_on_driver(
        self,
        spark: SparkSession,
        events: DataFrame,
        changes: Correction | None,
        histories: Pinned,
    ) -> tuple[pa.Table, pa.Table | None] | None:
        """The batch's enriched rows and its correction's net rows (net_rows; None without a
        correction) on the driver, or None when they are more than delta-rs appends
        (speed.delta_rs_append_rows and _mb). One Spark job: the events collected and enriched
        on the driver when the timelines and the corrected events' rows are there
        (enrich_of_rows), else their join (and the correction) collected."""
        speed = self.settings.speed
        bounds = speed.delta_rs_append_rows, speed.delta_rs_append_mb << 20
        before = None if changes is None else changes.before_rows
        users, products = histories["users"].segments, histories["products"].segments
        if users is None or products is None or (changes is not None and before is None):
            joined = enrich_as_pinned(events, histories)
            earlier = None if changes is None else self.before_frame(spark, changes)
            rows = collect_few(with_net(joined, earlier, before is not None, histories), *bounds)
            if rows is None:
                return None
            side = rows["_side"]
            fresh = rows.filter(pc.equal(side, 0)).drop_columns(["_side"])
            net = rows.filter(pc.not_equal(side, 0))
            if before is not None:
                net = net_of_rows(before, net.drop_columns(["_side"]))
            return fresh, None if changes is None else net
        found = collect_few(events, *bounds)
        if found is None:
            return None
        fresh = enrich_of_rows(found, users, products).select(list(ROW_COLUMNS))
        if before is None:
            return fresh, None
        again = enrich_of_rows(before.select([*EVENT_COLUMNS, "event_date"]), users, products)
        # Bound as the collect of with_net: the batch's rows and the affected events' again.
        if fresh.num_rows + again.num_rows > bounds[0] or fresh.nbytes + again.nbytes > bounds[1]:
            return None
        return fresh, net_of_rows(before, again.select(list(ROW_COLUMNS)))

    def write_from_driver(
        self,
        spark: SparkSession,
        app: str,
        batch_id: int,
        pins: Pins,
        collected: tuple[pa.Table, pa.Table | None],
        recorded: Future[None],
        started: float,
    ) -> None:
        """An untried batch, its rows few and `collected` (rows_on_driver): the enriched rows
        and the corrected ones, and the view's partial rows summed from both on the driver
        (revenue_of_rows), committed by delta-rs side by side once the pins are `recorded`,
        then the progress row. Its rows' collect was its last Spark job."""
        settings, out = self.settings, self.outputs
        fresh, net = collected
        partials = revenue_of_rows(fresh)
        if net is None:
            corrected = fresh.slice(0, 0)
        else:
            corrected = net.filter(pc.greater(net["_side"], 0))
            partials = pa.concat_tables([partials, revenue_of_rows(net, signed=True)])
        partials = partials.append_column(
            "batch_id", pa.array([batch_id] * partials.num_rows, pa.int64())
        )
        # The view's partition column (tables.WINDOW_HOUR), which Spark would have computed.
        partials = partials.append_column("window_hour", hour_value(partials["window_start"]))
        enriched = pa.concat_tables(
            [stamped_arrow(fresh, batch_id, False), stamped_arrow(corrected, batch_id, True)]
        )
        recorded.result()  # a batch whose pins failed to commit writes nothing
        with ThreadPoolExecutor(2) as pool:
            appends = [
                pool.submit(
                    append_arrow_batch, spark, enriched, out.enriched, settings, app, batch_id, True
                ),
                pool.submit(
                    append_arrow_batch, spark, partials, out.revenue, settings, app, batch_id, True
                ),
            ]
            for done in appends:
                done.result()  # a failed append fails the batch
        counts = (fresh.num_rows, corrected.num_rows)
        self.write_progress(spark, app, batch_id, True, pins, counts, started)

    def write_progress(
        self,
        spark: SparkSession,
        app: str,
        batch_id: int,
        untried: bool,
        pins: Pins,
        counts: tuple[int, int],
        started: float,
    ) -> None:
        """The batch's progress row (its events and corrections `counts`), written last."""
        row = {
            "app_id": app,
            "batch_id": batch_id,
            "events": counts[0],
            "corrected": counts[1],
            "versions": {k: v for k, v in pins.items() if v is not None},
            "processed_at": datetime.now(UTC),
            "duration_seconds": round(time.monotonic() - started, 3),
        }
        out = self.outputs
        append_rows_batch(spark, [row], out.progress, self.settings, app, batch_id, untried)

    @staticmethod
    def stamped(rows: DataFrame, batch_id: int, corrected: bool) -> DataFrame:
        return rows.select(*ROW_COLUMNS).withColumns(
            {
                "enriched_batch": F.lit(batch_id).cast("bigint"),
                "corrected": F.lit(corrected),
            }
        )

    def pin(
        self, spark: SparkSession, app: str, batch_id: int, untried: bool, pool: Executor
    ) -> tuple[Pins, Future[None]]:
        """The history versions batch `batch_id` joins with: those its first try recorded,
        or (a first try) the latest, recorded in `pool`; and that record's commit."""
        if not untried:
            found = pins_of(spark, self.settings, app, batch_id, self.outputs.pins)
            if found is not None:
                done: Future[None] = Future()
                done.set_result(None)
                return found, done
        # The latest versions, read by delta-rs (no Spark job; the same snapshot Spark reads).
        latest = {
            name: latest_version(self.settings, history_table(captured))
            for name, (_, captured) in DIMENSIONS.items()
        }
        latest[SILVER_PIN] = latest_version(self.settings, self.outputs.events)
        row = {
            "app_id": app,
            "batch_id": batch_id,
            "versions": {k: v for k, v in latest.items() if v is not None},
            "pinned_at": datetime.now(UTC),
        }
        target = self.outputs.pins
        return latest, pool.submit(
            append_rows_batch, spark, [row], target, self.settings, app, batch_id, untried
        )

    def history(self, spark: SparkSession, name: str, version: int | None) -> Known:
        """A dimension's history at `version` and its timeline, built once per version."""
        key = (name, version)
        if key not in self._histories:
            for old in [k for k in self._histories if k[0] == name]:
                dropped = self._previous.pop(name, None)
                if dropped is not None:
                    dropped[1].release()
                self._previous[name] = (old[1], self._histories.pop(old))
            dimension = DIMENSIONS[name][0]
            rows = history_rows(self.settings, name, version)
            if rows is None:
                found = history_at(spark, self.settings, name, version).localCheckpoint()
                segments = timeline(found, dimension).localCheckpoint()
                self._histories[key] = Known(found, segments, None, None)
            else:  # on the driver already, and so its timeline: nothing to checkpoint
                found = history_frame(spark, name, rows)
                lines = timeline(found, dimension).toArrow()
                segments = spark.createDataFrame(lines)
                self._histories[key] = Known(found, segments, rows, lines)
        return self._histories[key]

    def earlier_history(
        self, spark: SparkSession, name: str, version: int | None
    ) -> tuple[DataFrame, pa.Table | None]:
        """A dimension's history at an earlier `version`, and its rows when on the driver: as
        this processor held them when it joined with that version last (the batch before),
        else read again."""
        kept = self._previous.get(name)
        if kept is not None and kept[0] == version:
            return kept[1].history, kept[1].rows
        rows = history_rows(self.settings, name, version)
        if rows is None:
            return history_at(spark, self.settings, name, version), None
        return history_frame(spark, name, rows), rows

    def changed(self, spark: SparkSession, name: str, now: Known, version: int | None) -> Changed:
        """What changed in dimension `name`'s history since `version` (change_starts): on the
        driver when both versions' rows are there (change_starts_of_rows), else in Spark."""
        was, was_rows = self.earlier_history(spark, name, version)
        dimension = DIMENSIONS[name][0]
        if now.rows is None or was_rows is None:
            return measured_starts(now.history, was, dimension)
        rows = change_starts_of_rows(now.rows, was_rows, dimension)
        since = pc.min(rows["_from"]).as_py()
        return Changed(
            spark.createDataFrame(rows, STARTS_SCHEMA),
            None if since is None else to_micros(since),
            pc.any(rows["_new"]).as_py() or False,
            rows,
        )

    def corrections(
        self,
        spark: SparkSession,
        app: str,
        batch_id: int,
        pins: Pins,
        histories: Pinned,
        held: list[DataFrame],
    ) -> Correction | None:
        """The earlier events a change since the previous batch's pins may re-enrich: their
        latest rows and their enrichment at `pins`; None when no history changed since. What
        it checkpoints goes into `held`."""
        if self._pinned is not None and self._pinned[0] == batch_id - 1:
            previous: Pins | None = self._pinned[1]
        else:
            previous = previous_pins(spark, self.settings, app, batch_id, self.outputs.pins)
        enriched = self.outputs.enriched
        if previous is None or not table_exists(spark, enriched, self.settings):
            return None
        changes = {
            name: self.changed(spark, name, histories[name], previous.get(name))
            for name in DIMENSIONS
            if pins.get(name) != previous.get(name)
        }
        if not changes:
            return None
        held.extend(c.starts for c in changes.values() if c.rows is None)
        return self.affected(spark, batch_id, changes, held)

    def before_frame(self, spark: SparkSession, changes: Correction) -> DataFrame:
        """The corrected events' latest rows (ROW_COLUMNS) as a Spark frame."""
        if changes.before is not None:
            return changes.before
        schema = self.outputs.enriched.spark_schema()
        columns = StructType([schema[name] for name in ROW_COLUMNS])
        return spark.createDataFrame(changes.before_rows, columns)

    def affected(
        self,
        spark: SparkSession,
        batch_id: int,
        changes: Mapping[str, Changed],
        held: list[DataFrame],
    ) -> Correction | None:
        """The latest rows (ROW_COLUMNS) of the earlier events the `changes` may re-enrich;
        None when they bear on no event. On the driver while the rows to read are few and the
        changes were found there (corrections_arrow), else through Spark."""
        enriched = self.outputs.enriched
        schema = enriched.spark_schema()
        found = corrections_arrow.earlier_latest(self.settings, enriched, batch_id, changes)
        if found is not None and all(c.rows is not None for c in changes.values()):
            rows = corrections_arrow.affected_rows(found, changes)
            return Correction(None, rows.select(list(ROW_COLUMNS)))
        latest = (
            self.earlier_latest(spark, batch_id, changes)
            if found is None
            else spark.createDataFrame(found, schema)
        )
        if latest is None:
            return None
        affected = [
            affected_events(latest, c.starts, DIMENSIONS[name][0]) for name, c in changes.items()
        ]
        before = affected[0] if len(affected) == 1 else affected[0].unionByName(affected[1])
        before = before.distinct().select(*ROW_COLUMNS).localCheckpoint()
        held.append(before)
        return Correction(before, None)

    def earlier_latest(
        self, spark: SparkSession, batch_id: int, changes: Mapping[str, Changed]
    ) -> DataFrame | None:
        """The latest row of each earlier event of a key the `changes` changed, from the
        earliest instant they bear on, through Spark; None when they bear on no event."""
        enriched = self.outputs.enriched
        earlier = earlier_rows(spark, self.settings, enriched, batch_id, changes)
        if earlier is None:
            return None
        of_keys = [
            earlier.join(
                F.broadcast(c.starts.select(F.col("_key").alias(DIMENSIONS[name][0].event_key))),
                DIMENSIONS[name][0].event_key,
                "left_semi",
            )
            for name, c in changes.items()
        ]
        if len(of_keys) == 1:
            return latest_rows(of_keys[0])
        return latest_rows(of_keys[0].unionByName(of_keys[1]).distinct())


def with_net(
    joined: DataFrame, before: DataFrame | None, netted_on_driver: bool, histories: Pinned
) -> DataFrame:
    """A batch's enriched rows (`_side` 0) and, for a correcting batch, the net rows of the
    corrected events' latest rows `before` and their enrichment again (net_rows: -1 an event
    as it was enriched, +1 as it is); when the driver nets them (net_of_rows), the events
    enriched again (+1)."""
    rows = joined.select(*ROW_COLUMNS, F.lit(0).cast("bigint").alias("_side"))
    if before is None:
        return rows
    after = enriched_again(before, histories)
    if netted_on_driver:
        return rows.unionByName(after.withColumn("_side", F.lit(1).cast("bigint")))
    net = net_rows(before, after)
    net = net.withColumn("_side", F.col("_side").cast("bigint"))
    return rows.unionByName(net.select(*ROW_COLUMNS, "_side"))


def stamped_arrow(rows: pa.Table, batch_id: int, corrected: bool) -> pa.Table:
    """EnrichmentProcessor.stamped, of rows on the driver."""
    count = rows.num_rows
    return (
        rows.select(list(ROW_COLUMNS))
        .append_column("enriched_batch", pa.array([batch_id] * count, pa.int64()))
        .append_column("corrected", pa.array([corrected] * count, pa.bool_()))
    )


def enrich_as_pinned(events: DataFrame, histories: Pinned) -> DataFrame:
    """`events` enriched as of their time with the dimensions' pinned histories."""
    return enrich_by_timelines(events, histories["users"].timeline, histories["products"].timeline)


def enriched_again(before: DataFrame, histories: Pinned) -> DataFrame:
    """Earlier events' latest rows (ROW_COLUMNS) enriched again at the batch's pins."""
    events = before.select(*EVENT_COLUMNS, "event_date")
    return enrich_as_pinned(events, histories).select(*ROW_COLUMNS)


def pins_of(
    spark: SparkSession, settings: Settings, app: str, batch_id: int, pins: Table = PINS
) -> Pins | None:
    """The pins batch `batch_id` of `app` recorded (in `pins`), or None."""
    if not table_exists(spark, pins, settings):
        return None
    found = (
        read_table(spark, pins, settings)
        .where((F.col("app_id") == app) & (F.col("batch_id") == batch_id))
        .collect()
    )
    return _versions(found[0]["versions"]) if found else None


def previous_pins(
    spark: SparkSession, settings: Settings, app: str, batch_id: int, pins: Table = PINS
) -> Pins | None:
    """The pins of `app`'s last batch before `batch_id`, or None (its first batch)."""
    if not table_exists(spark, pins, settings):
        return None
    found = (
        read_table(spark, pins, settings)
        .where((F.col("app_id") == app) & (F.col("batch_id") < batch_id))
        .orderBy(F.col("batch_id").desc())
        .limit(1)
        .collect()
    )
    return _versions(found[0]["versions"]) if found else None


def _versions(stored: Mapping[str, int] | None) -> dict[str, int | None]:
    """Stored pins, a dimension whose history did not exist then as None."""
    return {name: None for name in DIMENSIONS} | dict(stored or {})
