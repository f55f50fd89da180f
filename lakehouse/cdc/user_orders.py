"""The changelog stream's upkeep of silver.user_orders (lakehouse.transforms.user_orders).

A micro-batch, once its users' and orders' current rows are merged, recomputes the view's rows
of the users its changes touch (affected_users) from those current tables, narrowed to those
users, and MERGEs them in: a user still current takes the recomputed row (inserted or
updated), a user no longer current loses theirs. Every other user's row depends on no row the
batch changed, so after each batch the view is the batch join of the current tables.

Exactly-once: the MERGE carries the batch's (writer id, batch id) as Delta's transaction id
(delta_io.merge_once). A retried batch whose MERGE had not committed recomputes from the
current tables its first try left, which its own MERGEs (skipped, or made again by the same
marks) leave as the first try did: the same users, the same rows. The affected users are read
from the batch's own changes, never from tables the batch writes, so a retry finds the same.

The first batch that finds no view (a new lakehouse, or one whose stream ran before the view
existed) builds it whole from the current tables, once, by the same marks.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from lakehouse.cdc.shop import ORDERS, USERS, CapturedTable
from lakehouse.core.config import Settings
from lakehouse.core.delta_io import append_once, merge_once, read_table, table_exists
from lakehouse.core.frames import rows_frame
from lakehouse.core.tables import table
from lakehouse.transforms.user_orders import (
    VIEW_COLUMNS,
    affected_users,
    user_orders,
    user_orders_of,
)

if TYPE_CHECKING:
    from delta.tables import DeltaMergeBuilder
    from pyspark.sql import Column, DataFrame, SparkSession

VIEW = table("silver.user_orders")
SIDES = (USERS, ORDERS)  # the captured tables the view is made of
LIVE = "_live"  # set on a recomputed row; null for an affected user with no current row


def maintained(tables: list[CapturedTable]) -> bool:
    """Whether the stream keeps the view: it captures both of its sides."""
    return all(side in tables for side in SIDES)


class CurrentNotMergedError(RuntimeError):
    """A side of the view had its current rows' MERGE fail: the view is not refreshed (its
    MERGE, marked with the batch, would make a retry skip it)."""


class CurrentMerges:
    """Which captured tables' current rows a batch has merged, for the view's refresh to wait
    on from another thread: each table's writes end (`ended`) whether or not they merged."""

    def __init__(self, tables: list[CapturedTable]) -> None:
        self._ended = {t.name: threading.Event() for t in tables}
        self._merged: set[str] = set()

    def merged(self, captured: CapturedTable) -> None:
        """The table's current rows are as the batch leaves them."""
        self._merged.add(captured.name)
        self._ended[captured.name].set()

    def ended(self, captured: CapturedTable) -> None:
        self._ended[captured.name].set()

    def wait(self, sides: tuple[CapturedTable, ...]) -> None:
        """Until each side's writes merged its current rows or ended without (then raise)."""
        for side in sides:
            self._ended[side.name].wait()
        failed = [side.name for side in sides if side.name not in self._merged]
        if failed:
            raise CurrentNotMergedError(f"{', '.join(failed)}: current rows not merged")


def read_current(spark: SparkSession, settings: Settings, captured: CapturedTable) -> DataFrame:
    """A side's current rows (none yet: no rows)."""
    target = table(f"silver.{captured.name}_current")
    if table_exists(spark, target, settings):
        return read_table(spark, target, settings)
    return rows_frame(spark, [], target.spark_schema())


def refresh_user_orders(
    spark: SparkSession,
    settings: Settings,
    users_changes: DataFrame,
    orders_changes: DataFrame,
    app: str,
    batch_id: int,
) -> None:
    """Bring the view's rows of the users this batch's changes (bronze rows of users and of
    orders) touch to the join of the current tables, after the batch's current-table MERGEs."""
    users = read_current(spark, settings, USERS)
    orders = read_current(spark, settings, ORDERS)
    if not table_exists(spark, VIEW, settings):
        append_once(user_orders(users, orders), VIEW, settings, app, batch_id)
        return
    # The ids on the driver (one small job), as literals: data skipping then prunes the
    # current tables' files by their user_id statistics.
    ids = [r["user_id"] for r in affected_users(users_changes, orders_changes).collect()]
    if not ids:
        return
    affected = rows_frame(spark, [(i,) for i in ids], "user_id string")
    mine = F.col("user_id").isin(ids)
    rows = user_orders_of(users.where(mine), orders.where(mine), affected)
    source = affected.join(rows.withColumn(LIVE, F.lit(True)), "user_id", "left")
    values: dict[str, str | Column] = {c: F.col(f"s.`{c}`") for c in VIEW_COLUMNS}

    def merge(builder: DeltaMergeBuilder) -> DeltaMergeBuilder:
        return (
            builder.whenMatchedDelete(condition=f"s.{LIVE} IS NULL")
            .whenMatchedUpdate(set=values)
            .whenNotMatchedInsert(condition=f"s.{LIVE} IS NOT NULL", values=values)
        )

    merge_once(source, VIEW, settings, app, batch_id, merge, on="t.user_id = s.user_id")
