"""Rebuilding the order state: a replay of the log from offset 0 into a replay version, and the
batch fold of bronze.commerce_raw. Both apply the stream's own functions
(lakehouse.transforms.commerce), so each must equal the live state; `state_differences` says
where one does not.

What can be rebuilt from what: bronze.commerce_raw holds every record byte for byte, so every
commerce table can be rebuilt from it; the topics (kept forever) rebuild them through a replay;
silver.order_events alone rebuilds silver.order_state and the rejections (fold_log).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from lakehouse.commerce.outputs import CommerceOutputs
from lakehouse.commerce.stream import ensure_commerce_topics, start_commerce_query
from lakehouse.core import commerce as contract
from lakehouse.core.config import Settings
from lakehouse.core.delta_io import read_table
from lakehouse.core.locks import exclusive_writer
from lakehouse.core.tables import table
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


def fold_bronze(spark: SparkSession, settings: Settings) -> tuple[DataFrame, DataFrame]:
    """The batch fold: (order state, rejected transitions) of every order event
    bronze.commerce_raw holds, validated and folded as the stream does."""
    raw = read_table(spark, table("bronze.commerce_raw"), settings)
    events = raw.where(F.col("topic") == settings.kafka.order_events_topic)
    validated = events.transform(
        validate_records, contract.ORDER_EVENT, ValidationRules.of(settings)
    )
    folded = fold_log(accepted_order_events(validated)).localCheckpoint()
    return state_rows(folded), rejection_rows(folded)


def state_differences(left: DataFrame, right: DataFrame) -> DataFrame:
    """The order state rows one side has and the other lacks (`side`: left or right); none
    when the two states are equal."""
    return (
        left.exceptAll(right)
        .withColumn("side", F.lit("left"))
        .unionByName(right.exceptAll(left).withColumn("side", F.lit("right")))
    )
