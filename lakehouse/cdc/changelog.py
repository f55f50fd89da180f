"""What the changelog stream does with one micro-batch of Debezium records (foreachBatch).

    bronze.<table>_changes   <- every change of the table as received, tombstones too (append)
    bronze.cdc_quarantine    <- records that cannot be applied, each with its reasons (append)
    silver.<table>_current   <- each key's last change of the batch in commit order (MERGE)
    silver.<table>_history   <- the versions the batch opens or ends (MERGE on key and lsn)
    silver.user_orders       <- the view's rows of the users the batch touched (MERGE, once
                                users' and orders' current rows are merged, beside their
                                histories; lakehouse.cdc.user_orders)
    ops.cdc_progress         <- one row: records, changes, quarantined, offsets (written last)

Exactly-once: the appends are marked with (this stream's writer id, batch id)
(delta_io.append_batch) and the MERGEs carry the pair as Delta's transaction id
(delta_io.merge_once), so a batch Spark replays after a crash applies nothing twice. It must
also decide the same: what a batch applies is read from the history as the batch before left it
(transforms.changes.unapplied_changes), and a table's history is merged after its current rows,
so until its own MERGE commits a retried batch finds the history as its first try did.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from lakehouse.cdc.shop import CAPTURED, CapturedTable
from lakehouse.cdc.user_orders import SIDES, CurrentMerges, maintained, refresh_user_orders
from lakehouse.core.checkpoints import checkpoint_query_id
from lakehouse.core.config import Settings
from lakehouse.core.delta_io import (
    append_batch,
    append_new,
    append_once,
    merge_once,
    read_before_batch,
    read_table,
    small_frame,
    table_exists,
)
from lakehouse.core.tables import CDC, Table, table
from lakehouse.transforms.bronze import to_raw_records
from lakehouse.transforms.changes import (
    CURRENT_SOURCE_COLUMNS,
    VERSION_COLUMNS,
    accepted_changes,
    distinct_changes,
    extend_history,
    parse_changes,
    quarantined_changes,
    typed_rows,
    unapplied_changes,
    winning_changes,
)

if TYPE_CHECKING:
    from delta.tables import DeltaMergeBuilder
    from pyspark.sql import Column, DataFrame, SparkSession

QUARANTINE = table("bronze.cdc_quarantine")
PROGRESS = table("ops.cdc_progress")


def changes_table(captured: CapturedTable) -> Table:
    return table(f"bronze.{captured.name}_changes")


def current_table(captured: CapturedTable) -> Table:
    return table(f"silver.{captured.name}_current")


def history_table(captured: CapturedTable) -> Table:
    return table(f"silver.{captured.name}_history")


class ChangelogProcessor:
    """The changelog stream's foreachBatch: one instance per query start."""

    def __init__(self, settings: Settings, checkpoint: str) -> None:
        self.settings = settings
        self.checkpoint = checkpoint
        self.tables = [CAPTURED[name] for name in settings.cdc.tables]
        self.by_topic = {captured.topic(settings.cdc): captured for captured in self.tables}
        self._app_id: str | None = None
        # The batch after the last one committed here, unless it was begun: a batch this
        # processor has not begun, right after one it committed, can have written nothing.
        self._next: int | None = None
        self._begun: int | None = None

    def app_id(self, spark: SparkSession) -> str:
        # The checkpoint's query id: stable across restarts, new when the checkpoint is reset.
        if self._app_id is None:
            self._app_id = f"{CDC}:{checkpoint_query_id(spark, self.checkpoint)}"
        return self._app_id

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        started = time.monotonic()
        spark = batch.sparkSession
        app = self.app_id(spark)
        untried = self._next == batch_id and self._begun != batch_id
        self._begun = batch_id
        parsed = batch.transform(to_raw_records).transform(parse_changes, self.by_topic).persist()
        try:
            counts = self.process(spark, parsed, app, batch_id, untried)
            row = progress_row(app, batch_id, parsed, counts, started)
            if untried or not progress_written(spark, self.settings, app, batch_id):
                append_new(small_frame(spark, [row], PROGRESS), PROGRESS, self.settings)
        finally:
            parsed.unpersist()
        self._next = batch_id + 1

    def process(
        self, spark: SparkSession, parsed: DataFrame, app: str, batch_id: int, untried: bool
    ) -> dict[str, int]:
        """Write the batch's tables; how many row changes each captured table applied."""
        settings = self.settings
        quarantined = quarantined_changes(parsed)
        if not quarantined.isEmpty() or not table_exists(spark, QUARANTINE, settings):
            append_batch(quarantined, QUARANTINE, settings, app, batch_id, untried=untried)
        accepted = accepted_changes(parsed)

        merges = CurrentMerges(self.tables)

        def write(captured: CapturedTable) -> int:
            try:
                mine = accepted.where(F.col("topic") == captured.topic(settings.cdc))
                if mine.isEmpty() and table_exists(spark, changes_table(captured), settings):
                    merges.merged(captured)
                    return 0
                append_batch(
                    mine, changes_table(captured), settings, app, batch_id, untried=untried
                )
                rows = typed_rows(mine, captured).localCheckpoint()
                return self.apply(spark, rows, captured, app, batch_id, merges, untried)
            finally:
                merges.ended(captured)

        def refresh_view() -> None:
            # The view joins users' and orders' current rows: it is refreshed once both are
            # merged, while their histories are.
            merges.wait(SIDES)
            users, orders = (
                accepted.where(F.col("topic") == side.topic(settings.cdc)) for side in SIDES
            )
            refresh_user_orders(spark, settings, users, orders, app, batch_id)

        # Each captured table's writes are its own (a table's current before its history);
        # side by side, the driver's planning and committing of one overlaps another's. A
        # failed write fails the batch, which is retried whole. The view's refresh is queued
        # last: every write it waits for has a thread before it does.
        with ThreadPoolExecutor(max(1, settings.speed.write_threads)) as pool:
            writes = [pool.submit(write, captured) for captured in self.tables]
            view = pool.submit(refresh_view) if maintained(self.tables) else None
            counts = [w.result() for w in writes]
            if view is not None:
                view.result()
        return {captured.name: n for captured, n in zip(self.tables, counts, strict=True)}

    def apply(
        self,
        spark: SparkSession,
        rows: DataFrame,
        captured: CapturedTable,
        app: str,
        batch: int,
        merges: CurrentMerges | None = None,
        untried: bool = False,
    ) -> int:
        """Merge a table's row changes into its current rows (told to `merges`), then its
        history; how many changes were applied (a change delivered twice counted once). A
        retried batch reads the history as its first try did, before its own MERGE: what it
        decides and counts is the first try's, whatever that try committed."""
        settings = self.settings
        history = read_before_batch(spark, history_table(captured), settings, app, batch, untried)
        unapplied = unapplied_changes(rows, history, captured).localCheckpoint()
        winners = winning_changes(unapplied, captured)
        merge_current(winners, current_table(captured), settings, captured, app, batch)
        if merges is not None:
            merges.merged(captured)
        extension = extend_history(history, rows, captured)
        merge_history(extension, history_table(captured), settings, captured, app, batch)
        return distinct_changes(unapplied, captured).count()


def merge_current(
    winners: DataFrame,
    target: Table,
    settings: Settings,
    captured: CapturedTable,
    app: str,
    batch: int,
) -> None:
    """Each key takes its winning change when it is later in commit order than the row's own:
    a delete removes the row, any other change replaces it; a key not there yet is inserted."""
    columns = (*captured.column_names, *CURRENT_SOURCE_COLUMNS)
    if not table_exists(winners.sparkSession, target, settings):
        rows = winners.where(~F.col("deletes")).select(*columns)
        append_once(rows, target, settings, app, batch)
        return
    values: dict[str, str | Column] = {c: F.col(f"s.`{c}`") for c in columns}

    def merge(builder: DeltaMergeBuilder) -> DeltaMergeBuilder:
        return (
            builder.whenMatchedDelete(condition="s.deletes AND s.lsn > t.lsn")
            .whenMatchedUpdate(condition="s.lsn > t.lsn", set=values)
            .whenNotMatchedInsert(condition="NOT s.deletes", values=values)
        )

    merge_once(winners, target, settings, app, batch, merge, on=key_match(captured))


def merge_history(
    extension: DataFrame,
    target: Table,
    settings: Settings,
    captured: CapturedTable,
    app: str,
    batch: int,
) -> None:
    """The versions a batch opens, and the open versions it ends, by key and lsn."""
    columns = (*captured.column_names, *VERSION_COLUMNS)
    values: dict[str, str | Column] = {c: F.col(f"s.`{c}`") for c in columns}

    def merge(builder: DeltaMergeBuilder) -> DeltaMergeBuilder:
        return builder.whenMatchedUpdate(set=values).whenNotMatchedInsert(values=values)

    on = f"{key_match(captured)} AND t.lsn = s.lsn"
    merge_once(extension.select(*columns), target, settings, app, batch, merge, on=on, mark=True)


def key_match(captured: CapturedTable) -> str:
    return " AND ".join(f"t.`{c}` = s.`{c}`" for c in captured.key)


def progress_row(
    app: str, batch_id: int, parsed: DataFrame, applied: dict[str, int], started: float
) -> dict[str, object]:
    """The batch's counts and the next offset of each topic partition it read."""
    totals = parsed.agg(
        F.count(F.lit(1)).alias("records"),
        F.sum(F.when(F.size("reasons") > 0, 1).otherwise(0)).alias("quarantined"),
        F.sum(F.when(F.col("tombstone") & (F.size("reasons") == 0), 1).otherwise(0)).alias(
            "tombstones"
        ),
        F.max("commit_time").alias("newest_commit_time"),
    ).first()
    assert totals is not None
    ends = parsed.groupBy("topic", "partition").agg(F.max("offset").alias("last")).collect()
    return {
        "app_id": app,
        "batch_id": batch_id,
        "records": int(totals["records"]),
        "quarantined": int(totals["quarantined"] or 0),
        "tombstones": int(totals["tombstones"] or 0),
        "applied": applied,
        "offsets": {f"{r['topic']}:{r['partition']}": int(r["last"]) + 1 for r in ends},
        "newest_commit_time": totals["newest_commit_time"],
        "processed_at": datetime.now(UTC),
        "duration_seconds": round(time.monotonic() - started, 3),
    }


def progress_written(spark: SparkSession, settings: Settings, app: str, batch_id: int) -> bool:
    if not table_exists(spark, PROGRESS, settings):
        return False
    rows = read_table(spark, PROGRESS, settings)
    return not rows.where((F.col("app_id") == app) & (F.col("batch_id") == batch_id)).isEmpty()
