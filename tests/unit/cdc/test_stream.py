"""The changelog stream refuses to start on a checkpoint that did not write its tables: a query
there would read the changelog topics from the start again and copy every change into
bronze.<table>_changes a second time. The check comes before the query reads anything."""

from __future__ import annotations

import pytest

from lakehouse.cdc.changelog import PROGRESS
from lakehouse.cdc.stream import start_changelog_query
from lakehouse.core.config import Settings
from lakehouse.core.delta_io import append_new
from lakehouse.core.frames import rows_frame
from lakehouse.core.stream_outputs import OtherCheckpointError


def test_a_query_on_another_checkpoint_is_refused_before_it_reads_the_topics(
    spark, local_settings: Settings
) -> None:
    row = {"app_id": "cdc:an-earlier-query", "batch_id": 0}
    append_new(rows_frame(spark, [row], PROGRESS.spark_schema()), PROGRESS, local_settings)
    with pytest.raises(OtherCheckpointError) as refused:
        start_changelog_query(spark, local_settings, available_now=True)
    said = str(refused.value)
    assert said.startswith("ops.cdc_progress holds what another checkpoint's query wrote ")
    assert "(cdc:an-earlier-query)" in said and "put that checkpoint back" in said, said
    assert not spark.streams.active
