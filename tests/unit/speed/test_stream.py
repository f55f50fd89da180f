"""The speed layer's query refuses to start on a checkpoint other than the one whose batches
its tables hold (the old one deleted or moved): on a new checkpoint its first batch pins no
silver version, so it would take every event it reads for new and write it a second time.
The refusal comes before the query reads the log, so no broker is needed here."""

from __future__ import annotations

import pytest

from lakehouse.core.config import Settings
from lakehouse.core.delta_io import append_new
from lakehouse.core.frames import rows_frame
from lakehouse.core.stream_outputs import OtherCheckpointError
from lakehouse.speed.micro_batch import SpeedOutputs
from lakehouse.speed.stream import start_query


def record_batch(spark, settings: Settings, outputs: SpeedOutputs, app_id: str) -> None:
    row = {"app_id": app_id, "batch_id": 0}
    frame = rows_frame(spark, [row], outputs.progress.spark_schema())
    append_new(frame, outputs.progress, settings)


def test_a_query_on_another_checkpoint_is_refused_before_it_reads_the_log(
    spark, local_settings: Settings
) -> None:
    live = SpeedOutputs.live()
    record_batch(spark, local_settings, live, "live:an-earlier-query")
    with pytest.raises(OtherCheckpointError) as refused:
        start_query(spark, local_settings, live, available_now=True)
    said = str(refused.value)
    assert said.startswith("silver.events holds what another checkpoint's query wrote ")
    assert "(live:an-earlier-query)" in said and "put that checkpoint back" in said, said
    assert not spark.streams.active

    replay = SpeedOutputs.replay("v7")
    record_batch(spark, local_settings, replay, "replay_v7:an-earlier-query")
    with pytest.raises(OtherCheckpointError, match=r"jobs\.versions remove v7`\) and replay it"):
        start_query(spark, local_settings, replay, available_now=True)
    assert not spark.streams.active
