"""The batch recompute of the CDC tables, and its comparison with what the stream wrote.

The judge recomputes each captured table's current rows and history from its bronze changes
alone (lakehouse.transforms.changes: current_rows, history_rows, the very functions the stream's
incremental MERGEs must agree with) and compares them with silver.<table>_current and
silver.<table>_history, key by key and version by version.

A running stream is caught mid-batch: it appends a batch's changes to bronze before it merges
them. So the stream's tables are read first (each at one version) and bronze after, which then
holds every change they hold. A key with a change beyond the stream's last completed batch
(ops.cdc_progress: the next offset of each topic partition) is in flight and left out of this
comparison; every other key must be equal in both, row for row.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F

from lakehouse.cdc.changelog import PROGRESS, changes_table, current_table, history_table
from lakehouse.cdc.shop import CAPTURED, CapturedTable
from lakehouse.core.config import Settings
from lakehouse.core.delta_io import read_table, read_table_at, table_exists, table_version
from lakehouse.transforms.changes import (
    CURRENT_SOURCE_COLUMNS,
    VERSION_COLUMNS,
    current_rows,
    history_rows,
    typed_rows,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

EXAMPLES = 5


class NothingToReconcile(Exception):
    """The changelog stream has completed no batch yet."""


@dataclass(frozen=True)
class TableReconciliation:
    """One captured table: the keys compared, those left out, and every difference found."""

    table: str
    batch_id: int  # the stream's last completed batch the comparison is as of
    compared_keys: int
    in_flight_keys: int
    current_differences: int  # keys whose current row is missing, extra or not the same
    history_differences: int  # versions missing, extra or not the same
    examples: list[dict[str, Any]] = field(default_factory=list)

    @property
    def equal(self) -> bool:
        return self.current_differences == 0 and self.history_differences == 0


def reconcile_changelog(spark: SparkSession, settings: Settings) -> list[TableReconciliation]:
    """Every captured table's stream output against its recompute from bronze."""
    progress = last_progress(spark, settings)
    return [
        reconcile_table(spark, settings, CAPTURED[name], progress) for name in settings.cdc.tables
    ]


def last_progress(spark: SparkSession, settings: Settings) -> dict[str, Any]:
    """The stream's last completed batch, and the next offset of every topic partition its
    batches read: offsets only grow, and a batch that read nothing of a partition names none."""
    if not table_exists(spark, PROGRESS, settings):
        raise NothingToReconcile("the changelog stream has completed no batch yet")
    rows = read_table(spark, PROGRESS, settings)
    newest = rows.orderBy(F.desc("processed_at")).first()
    assert newest is not None, "a progress table holds the rows of completed batches"
    mine = rows.where(F.col("app_id") == newest["app_id"])
    ends = mine.select(F.explode("offsets")).groupBy("key").agg(F.max("value").alias("next"))
    offsets = {r["key"]: int(r["next"]) for r in ends.collect()}
    return {"batch_id": newest["batch_id"], "offsets": offsets}


def reconcile_table(
    spark: SparkSession, settings: Settings, captured: CapturedTable, progress: dict[str, Any]
) -> TableReconciliation:
    # The stream's tables first, each at one version; bronze after (see the module's rule).
    stream_current = pinned(spark, settings, current_table(captured))
    stream_history = pinned(spark, settings, history_table(captured))
    bronze = pinned(spark, settings, changes_table(captured))
    if bronze is None or stream_current is None or stream_history is None:
        return TableReconciliation(captured.name, progress["batch_id"], 0, 0, 0, 0)
    ends = progress["offsets"] or {}
    next_offset = F.coalesce(
        F.element_at(
            F.create_map(*[F.lit(x) for pair in ends.items() for x in pair]),
            F.concat_ws(":", "topic", F.col("partition").cast("string")),
        )
        if ends
        else F.lit(None),
        F.lit(0),
    )
    rows = typed_rows(bronze.withColumn("_beyond", F.col("offset") >= next_offset), captured)
    keys = list(captured.key)
    in_flight = rows.where("_beyond").select(*keys).distinct()
    settled = rows.where(~F.col("_beyond")).drop("_beyond").join(in_flight, keys, "left_anti")

    def left_out(df: DataFrame) -> DataFrame:
        return df.join(in_flight, keys, "left_anti")

    current_columns = [*captured.column_names, *CURRENT_SOURCE_COLUMNS]
    history_columns = [*captured.column_names, *VERSION_COLUMNS]
    current_diff = differences(
        current_rows(settled, captured).select(*current_columns),
        left_out(stream_current).select(*current_columns),
    )
    history_diff = differences(
        history_rows(settled, captured).select(*history_columns),
        left_out(stream_history).select(*history_columns),
    )
    examples = [
        {"table": kind, "in": row["_side"], **{k: str(v) for k, v in row.asDict().items()}}
        for kind, diff in (("current", current_diff), ("history", history_diff))
        for row in diff.limit(EXAMPLES).collect()
    ]
    return TableReconciliation(
        table=captured.name,
        batch_id=progress["batch_id"],
        compared_keys=settled.select(*keys).distinct().count(),
        in_flight_keys=in_flight.count(),
        current_differences=current_diff.select(*keys).distinct().count(),
        history_differences=history_diff.count(),
        examples=examples,
    )


def pinned(spark: SparkSession, settings: Settings, table: Any) -> DataFrame | None:
    """The table at its latest version, read at that version from then on."""
    return read_table_at(spark, table, settings, table_version(spark, table, settings))


def differences(batch: DataFrame, stream: DataFrame) -> DataFrame:
    """Rows one side has and the other lacks (as many times as it has them more), with
    `_side` naming the side that has it."""
    return (
        batch.exceptAll(stream)
        .withColumn("_side", F.lit("batch only"))
        .unionByName(stream.exceptAll(batch).withColumn("_side", F.lit("stream only")))
    )
