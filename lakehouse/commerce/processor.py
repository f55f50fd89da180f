"""What the commerce stream does with one micro-batch of order events and payments
(foreachBatch), into the live tables or a replay's (CommerceOutputs):

    bronze.commerce_raw              <- every record as received, byte for byte (live only)
    bronze.commerce_quarantine       <- records that break their contract, with every reason
    silver.order_events / .payments  <- first deliveries of ids no earlier batch had
    silver.order_transitions_rejected <- the batch's order events the lifecycle refused
    silver.order_state               <- the orders the batch touched, folded on (MERGE)
    ops.commerce_progress            <- one row: the counts and the offsets read (written last)

Accounting: records = order events + payments + quarantined + duplicates (a delivery of an id
an earlier delivery in the log already brought, whatever it says).

Exactly-once: every write is marked with (this application's id, batch id), the appends by
delta_io.append_batch and the state MERGE by a mark and a transaction id of its own, so a batch
Spark replays after a crash writes nothing twice. It also decides as its first try did: what
it reads of its own tables (the ids already in silver, the state it folds on) is read at the
version before the batch's own mark, when a first try wrote one.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from lakehouse.commerce.outputs import CommerceOutputs
from lakehouse.core import commerce as contract
from lakehouse.core.checkpoints import checkpoint_query_id
from lakehouse.core.config import Settings
from lakehouse.core.delta_io import (
    COMMIT_METADATA,
    TXN_APP_ID,
    TXN_VERSION,
    append_batch,
    append_new,
    batch_mark,
    conformed,
    marked_version,
    read_before_batch,
    read_table,
    small_frame,
    table_exists,
)
from lakehouse.core.spark import HOW_TO_RUN, interpreted_projections, release_local_checkpoint
from lakehouse.core.tables import Table
from lakehouse.transforms.bronze import to_raw_records
from lakehouse.transforms.commerce import (
    accepted,
    first_deliveries,
    fold_order_events,
    not_seen,
    quarantined_records,
    rejection_rows,
    state_rows,
    validate_records,
)
from lakehouse.transforms.validate import ValidationRules

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, Row, SparkSession


class CommerceProcessor:
    """The commerce stream's foreachBatch: one instance per query start."""

    def __init__(self, settings: Settings, outputs: CommerceOutputs, checkpoint: str) -> None:
        self.settings = settings
        self.outputs = outputs
        self.checkpoint = checkpoint
        self.rules = ValidationRules.of(settings)
        self.specs = {
            settings.kafka.order_events_topic: contract.ORDER_EVENT,
            settings.kafka.payments_topic: contract.PAYMENT,
        }
        self._app_id: str | None = None
        # The batch after the last one committed here, unless it was begun: a batch this
        # processor has not begun, right after one it committed, can have written nothing.
        self._next: int | None = None
        self._begun: int | None = None

    def app_id(self, spark: SparkSession) -> str:
        # The checkpoint's query id: stable across restarts, new when the checkpoint is reset.
        if self._app_id is None:
            self._app_id = f"{self.outputs.name}:{checkpoint_query_id(spark, self.checkpoint)}"
        return self._app_id

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        started = time.monotonic()
        spark = batch.sparkSession
        untried = self._next == batch_id and self._begun != batch_id
        self._begun = batch_id
        # Checkpointed: ingested_at is read once, the same in every table the batch writes.
        raw = batch.transform(to_raw_records).localCheckpoint()
        try:
            write = BatchWrite(self, spark, self.app_id(spark), batch_id, untried)
            read = raw.groupBy("topic", "partition").agg(
                F.max("offset").alias("last"), F.count(F.lit(1)).alias("records")
            )
            positions = read.collect()
            small = sum(r["records"] for r in positions) < self.settings.speed.small_batch_records
            with interpreted_projections(spark, small):
                counts = write.tables(raw)
                write.progress(positions, counts, started)
        finally:
            release_local_checkpoint(raw)
        self._next = batch_id + 1


class BatchWrite:
    """One micro-batch's writes, every one marked with (app, batch)."""

    def __init__(
        self, processor: CommerceProcessor, spark: SparkSession, app: str, batch: int, untried: bool
    ) -> None:
        self.processor = processor
        self.settings = processor.settings
        self.outputs = processor.outputs
        self.spark = spark
        self.app = app
        self.batch = batch
        self.untried = untried

    def append(self, rows: DataFrame, target: Table, count: int | None = None) -> None:
        """Append the batch's rows once (`count`: how many, when known); an empty append only
        creates the table."""
        if count != 0 or not table_exists(self.spark, target, self.settings):
            append_batch(rows, target, self.settings, self.app, self.batch, untried=self.untried)

    def before_batch(self, target: Table) -> DataFrame:
        """The table as the batch before left it (no rows yet: none)."""
        return read_before_batch(
            self.spark, target, self.settings, self.app, self.batch, self.untried
        )

    def tables(self, raw: DataFrame) -> dict[str, int]:
        """Write the batch's tables; their counts. The raw copy, the quarantine and the
        payments go side by side with the order events and their fold: each write is largely
        the driver's planning and committing. A failed write fails the batch, retried whole."""
        outputs, specs = self.outputs, self.processor.specs
        validated = {
            spec.name: raw.where(F.col("topic") == topic)
            .transform(validate_records, spec, self.processor.rules)
            .localCheckpoint()
            for topic, spec in specs.items()
        }
        events, payments = validated["order_event"], validated["payment"]
        try:
            # Leaving the block waits for every write, so the checkpoints outlive them all.
            with ThreadPoolExecutor(max(1, self.settings.speed.write_threads)) as pool:
                copied = pool.submit(self.append, raw, outputs.raw) if outputs.raw else None
                quarantined = pool.submit(self.quarantine, events, payments)
                paid = pool.submit(self.new_rows, payments, contract.PAYMENT, outputs.payments)
                new_events, _, event_duplicates = self.new_rows(
                    events, contract.ORDER_EVENT, outputs.order_events
                )
                try:
                    counts = self.fold(new_events)
                finally:
                    release_local_checkpoint(new_events)
                new_payments, counts["payments"], payment_duplicates = paid.result()
                release_local_checkpoint(new_payments)
                counts["quarantined"] = quarantined.result()
                if copied is not None:
                    copied.result()
        finally:
            for frame in validated.values():
                release_local_checkpoint(frame)
        return counts | {"duplicates": event_duplicates + payment_duplicates}

    def quarantine(self, events: DataFrame, payments: DataFrame) -> int:
        rows = quarantined_records(events).unionByName(quarantined_records(payments))
        count = rows.count()
        self.append(rows, self.outputs.quarantine, count)
        return count

    def new_rows(
        self, validated: DataFrame, spec: contract.Contract, target: Table
    ) -> tuple[DataFrame, int, int]:
        """Append the accepted records whose id neither this batch nor an earlier one brought
        before; return them (checkpointed), how many, and how many other deliveries there were
        (duplicates)."""
        deliveries = accepted(validated, spec)
        firsts = first_deliveries(deliveries, spec.id_field)
        new = not_seen(firsts, self.before_batch(target), spec.id_field).localCheckpoint()
        count = new.count()
        self.append(new, target, count)
        return new, count, deliveries.count() - count

    def fold(self, new_events: DataFrame) -> dict[str, int]:
        """Fold the batch's new order events onto the state the batch before left, record the
        refused ones and MERGE the orders touched."""
        outputs = self.outputs
        previous = self.before_batch(outputs.state)
        folded = fold_order_events(new_events, previous).localCheckpoint()
        try:
            rejected = rejection_rows(folded)
            refused = rejected.count()
            self.append(rejected, outputs.rejected, refused)
            self.merge_state(state_rows(folded))
            events = new_events.count()
        finally:
            release_local_checkpoint(folded)
        return {"order_events": events, "applied": events - refused, "rejected": refused}

    def merge_state(self, rows: DataFrame) -> None:
        """The touched orders' state rows replace theirs (or are inserted), once per batch."""
        target, settings = self.outputs.state, self.settings
        if not table_exists(self.spark, target, settings):
            append_batch(rows, target, settings, self.app, self.batch)
            return
        if rows.isEmpty():
            return
        if (
            not self.untried
            and marked_version(self.spark, target, settings, self.app, self.batch) is not None
        ):
            return
        from delta.tables import DeltaTable

        # The mark and transaction id of a MERGE can only be given as session settings; a
        # session of its own keeps them from the writes other threads make meanwhile.
        session = self.spark.newSession()
        for key in HOW_TO_RUN:
            value = self.spark.conf.get(key, None)
            if value is not None:
                session.conf.set(key, value)
        session.conf.set(COMMIT_METADATA, batch_mark(self.app, self.batch))
        session.conf.set(TXN_APP_ID, self.app)
        session.conf.set(TXN_VERSION, str(self.batch))
        source = conformed(rows, target)
        (
            DeltaTable.forPath(session, target.path(settings))
            .alias("t")
            .merge(source.alias("s"), "t.order_id = s.order_id")
            .whenMatchedUpdateAll()
            .whenNotMatchedInsertAll()
            .execute()
        )

    def progress(self, positions: list[Row], counts: dict[str, int], started: float) -> None:
        """The batch's progress row, from what it read (`positions`: per topic partition its
        last offset and records) and its counts; once per batch."""
        target = self.outputs.progress
        if not self.untried and progress_written(self.spark, target, self.settings, self):
            return
        row = {
            "app_id": self.app,
            "batch_id": self.batch,
            "records": sum(int(r["records"]) for r in positions),
            **{name: counts[name] for name in PROGRESS_COUNTS},
            "offsets": {f"{r['topic']}:{r['partition']}": int(r["last"]) + 1 for r in positions},
            "processed_at": datetime.now(UTC),
            "duration_seconds": round(time.monotonic() - started, 3),
        }
        append_new(small_frame(self.spark, [row], target), target, self.settings)


PROGRESS_COUNTS = ("quarantined", "duplicates", "order_events", "payments", "applied", "rejected")


def progress_written(
    spark: SparkSession, target: Table, settings: Settings, write: BatchWrite
) -> bool:
    if not table_exists(spark, target, settings):
        return False
    rows = read_table(spark, target, settings)
    mine = (F.col("app_id") == write.app) & (F.col("batch_id") == write.batch)
    return not rows.where(mine).isEmpty()
