"""The commerce stream refuses to start on a checkpoint that did not write its tables: a query
there would read both topics from the start again and copy every record into bronze a second
time. The check comes before the query reads anything (no Kafka is needed to see it)."""

from __future__ import annotations

import pytest

from lakehouse.commerce.outputs import CommerceOutputs
from lakehouse.commerce.stream import start_commerce_query
from lakehouse.core.config import Settings
from lakehouse.core.delta_io import append_new
from lakehouse.core.frames import rows_frame
from lakehouse.core.stream_outputs import OtherCheckpointError


def record_batch(spark, settings: Settings, outputs: CommerceOutputs, app_id: str) -> None:
    row = {"app_id": app_id, "batch_id": 0}
    append_new(
        rows_frame(spark, [row], outputs.progress.spark_schema()), outputs.progress, settings
    )


def test_a_query_on_another_checkpoint_is_refused_before_it_reads_the_topics(
    spark, local_settings: Settings
) -> None:
    live = CommerceOutputs.live()
    record_batch(spark, local_settings, live, "commerce_stream:an-earlier-query")
    with pytest.raises(OtherCheckpointError) as refused:
        start_commerce_query(spark, local_settings, live, available_now=True)
    said = str(refused.value)
    assert said.startswith("bronze.commerce_raw holds what another checkpoint's query wrote ")
    assert "(commerce_stream:an-earlier-query)" in said and "put that checkpoint back" in said
    assert not spark.streams.active

    replay = CommerceOutputs.replay("v7")
    record_batch(spark, local_settings, replay, "replay_v7_commerce:an-earlier-query")
    with pytest.raises(OtherCheckpointError) as refused:
        start_commerce_query(spark, local_settings, replay, available_now=True)
    said = str(refused.value)
    assert said.startswith("replay_v7.order_events holds what another checkpoint's query wrote")
    assert "`python -m jobs.versions remove v7`) and replay it" in said, said
    assert not spark.streams.active
