"""Rebuilding the order state: a replay of the log from offset 0 into a replay version, and the
batch fold of bronze.commerce_raw. Both apply the stream's own functions
(lakehouse.transforms.commerce), so each must equal the live state; `state_differences` says
where one does not.

What can be rebuilt from what: bronze.commerce_raw holds every record byte for byte, so every
commerce table can be rebuilt from it; the topics (kept forever) rebuild them through a replay;
silver.order_events alone rebuilds silver.order_state and the rejections (fold_log).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from lakehouse.commerce.outputs import CommerceOutputs
from lakehouse.commerce.stream import ensure_commerce_topics, start_commerce_query
from lakehouse.core import commerce as contract
from lakehouse.core.config import Settings
from lakehouse.core.delta_io import (
    MARK_PREFIX,
    MARK_SEARCH_COMMITS,
    read_table,
    read_table_at,
    table_exists,
)
from lakehouse.core.locks import exclusive_writer
from lakehouse.core.tables import Table, table
from lakehouse.speed.stream import QueryFailedError, await_end
from lakehouse.transforms.commerce import (
    accepted_order_events,
    fold_log,
    rejection_rows,
    state_rows,
    validate_records,
)
from lakehouse.transforms.validate import ValidationRules

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def replay_commerce(spark: SparkSession, settings: Settings, version: str) -> CommerceOutputs:
    """Run the commerce stream from offset 0 of both topics into `replay_<version>.*` until it
    has read what they hold now; its own checkpoint, so a second call continues where the
    first stopped. Raises QueryFailedError when the query stops on an error."""
    outputs = CommerceOutputs.replay(version)
    ensure_commerce_topics(settings)
    with exclusive_writer(settings, outputs.lock):
        query = start_commerce_query(spark, settings, outputs, available_now=True)
        while query.isActive:
            await_end(query, 1)
        failure = query.exception()
        if failure is not None:
            raise QueryFailedError(str(failure).strip().splitlines()[0][:2000])
    return outputs


def fold_bronze(
    spark: SparkSession, settings: Settings, raw: DataFrame | None = None
) -> tuple[DataFrame, DataFrame]:
    """The batch fold: (order state, rejected transitions) of every order event in
    bronze.commerce_raw (or in `raw`, its rows at some version), validated and folded as the
    stream does."""
    if raw is None:
        raw = read_table(spark, table("bronze.commerce_raw"), settings)
    events = raw.where(F.col("topic") == settings.kafka.order_events_topic)
    rules = ValidationRules.of(settings)
    validated = events.transform(validate_records, contract.ORDER_EVENT, rules)
    folded = fold_log(accepted_order_events(validated)).localCheckpoint()
    return state_rows(folded), rejection_rows(folded)


class NothingToCompare(Exception):
    """The live commerce stream has completed no batch yet."""


@dataclass(frozen=True)
class Judged:
    """The live state against the batch fold of bronze, both as of one completed batch."""

    app_id: str
    batch_id: int
    orders: int
    differences: DataFrame  # state_differences(live, folded): no rows when equal


def judge_live_state(spark: SparkSession, settings: Settings) -> Judged:
    """Fold bronze.commerce_raw as the live stream's last completed batch (the newest with a
    progress row, written last) left it, and compare it with silver.order_state as that
    batch left it: a stream that is running meanwhile moves neither side. Raises
    NothingToCompare before the first batch, and LookupError when the stream has committed
    too many batches since to find that one's versions (run it again)."""
    live = CommerceOutputs.live()
    if not table_exists(spark, live.progress, settings):
        raise NothingToCompare("the commerce stream has completed no batch yet: nothing compared")
    last = read_table(spark, live.progress, settings).orderBy(F.desc("processed_at")).first()
    if last is None:
        raise NothingToCompare("the commerce stream has completed no batch yet: nothing compared")
    app, batch = str(last["app_id"]), int(last["batch_id"])
    assert live.raw is not None
    raw = read_table_at(
        spark, live.raw, settings, version_through(spark, live.raw, settings, app, batch)
    )
    state = read_table_at(
        spark, live.state, settings, version_through(spark, live.state, settings, app, batch)
    )
    assert raw is not None and state is not None
    folded, _ = fold_bronze(spark, settings, raw)
    return Judged(app, batch, state.count(), state_differences(state, folded))


def version_through(
    spark: SparkSession, target: Table, settings: Settings, app: str, batch: int
) -> int:
    """The newest version of the table written by `app`'s batch `batch` or an earlier one."""
    from delta.tables import DeltaTable

    history = DeltaTable.forPath(spark, target.path(settings)).history(MARK_SEARCH_COMMITS)
    for row in history.select("version", "userMetadata").orderBy(F.desc("version")).collect():
        meta = row["userMetadata"] or ""
        if meta.startswith(MARK_PREFIX):
            mark = json.loads(meta.removeprefix(MARK_PREFIX))
            if mark["app"] == app and int(mark["batch"]) <= batch:
                return int(row["version"])
    raise LookupError(
        f"{target.name}: no write of batch {batch} or before among its last "
        f"{MARK_SEARCH_COMMITS} commits (the stream has moved on): run again"
    )


def differing_orders(differences: DataFrame, examples: int) -> tuple[int, list[str]]:
    """(orders that differ, the first `examples` differing rows named by their order) of
    state_differences' rows."""
    first = differences.orderBy("order_id", "side").limit(examples).collect()
    differing = differences.select("order_id").distinct().count() if first else 0
    return differing, [f"order_id={r['order_id']}: {r.asDict()}" for r in first]


def state_differences(left: DataFrame, right: DataFrame) -> DataFrame:
    """The order state rows one side has and the other lacks (`side`: left or right); none
    when the two states are equal."""
    return (
        left.exceptAll(right)
        .withColumn("side", F.lit("left"))
        .unionByName(right.exceptAll(left).withColumn("side", F.lit("right")))
    )
