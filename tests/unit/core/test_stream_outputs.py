"""A stream's outputs belong to its checkpoint: the check passes while every batch its progress
table records is its own checkpoint's query's (or none is), and names the other query when
one is not; `where` keeps one query's rows of a shared progress table.

Each stream that copies its topics into bronze (the speed layer, the commerce stream, the
changelog stream; a replay version's too) refuses to start on another checkpoint, before its
query reads anything (no broker is needed here): on a new checkpoint it would read its topics
from the start and write every record a second time. The enrichment's and the windowed joins'
checks are in tests/unit/joins."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.compute as pc
import pytest

from lakehouse.core.config import Settings
from lakehouse.core.delta_io import append_new
from lakehouse.core.frames import rows_frame
from lakehouse.core.stream_outputs import OtherCheckpointError, check_own_outputs
from lakehouse.core.tables import Table, table
from tests.micro_batches import batch_of_another_query

OUTPUT = table("silver.purchase_attribution")
PROGRESS = Table("ops.test_progress", "test", "progress rows", schema="query string, app_id string")


def started_checkpoint(folder: Path, query_id: str) -> str:
    """A checkpoint as Spark leaves it after a query's first start."""
    folder.mkdir(parents=True)
    (folder / "metadata").write_text(json.dumps({"id": query_id}) + "\n")
    return str(folder)


def check(spark, settings: Settings, checkpoint: str, where: pc.Expression | None = None) -> None:
    check_own_outputs(
        spark,
        settings,
        output=OUTPUT,
        progress=PROGRESS,
        checkpoint=checkpoint,
        app_prefix="joins:attribution:",
        fix="reset it",
        where=where,
    )


def test_outputs_of_its_own_checkpoint_or_none_pass_and_another_s_are_named(
    spark, local_settings: Settings, tmp_path: Path
) -> None:
    mine = started_checkpoint(tmp_path / "mine", "q1")
    fresh = str(tmp_path / "never-started")
    check(spark, local_settings, fresh)  # no progress table: nothing written yet

    rows = [{"query": "attribution", "app_id": "joins:attribution:q1"}]
    append_new(rows_frame(spark, rows, PROGRESS.spark_schema()), PROGRESS, local_settings)
    check(spark, local_settings, mine)
    with pytest.raises(OtherCheckpointError) as refused:
        check(spark, local_settings, fresh)
    assert str(refused.value) == (
        "silver.purchase_attribution holds what another checkpoint's query wrote "
        f"(joins:attribution:q1), and {fresh} is not its checkpoint: a query there would read "
        "its input from the start again and write its rows a second time; reset it"
    )

    other = [{"query": "order_payments", "app_id": "joins:order_payments:q2"}]
    append_new(rows_frame(spark, other, PROGRESS.spark_schema()), PROGRESS, local_settings)
    check(spark, local_settings, mine, where=pc.field("query") == "attribution")
    with pytest.raises(OtherCheckpointError, match=r"\(joins:order_payments:q2\)"):
        check(spark, local_settings, mine)


def _speed(outputs):
    from lakehouse.speed.stream import start_query

    return lambda spark, settings: start_query(spark, settings, outputs, available_now=True)


def _commerce(outputs):
    from lakehouse.commerce.stream import start_commerce_query

    return lambda spark, settings: start_commerce_query(spark, settings, outputs, True)


def _changelog(spark, settings: Settings) -> None:
    from lakehouse.cdc.stream import start_changelog_query

    start_changelog_query(spark, settings, available_now=True)


def _streams():
    """(start, progress table, app id prefix, the output named, what the message says to do)."""
    from lakehouse.cdc.changelog import PROGRESS as CDC_PROGRESS
    from lakehouse.commerce.outputs import CommerceOutputs
    from lakehouse.speed.outputs import SpeedOutputs

    again = "(`python -m jobs.versions remove v7`) and replay it"
    live, replay = SpeedOutputs.live(), SpeedOutputs.replay("v7")
    shop, shop_replay = CommerceOutputs.live(), CommerceOutputs.replay("v7")
    return {
        "speed layer": (_speed(live), live.progress, "live:", "silver.events", "put that"),
        "speed replay": (_speed(replay), replay.progress, "replay_v7:", "replay_v7.events", again),
        "commerce": (
            _commerce(shop),
            shop.progress,
            "commerce_stream:",
            "bronze.commerce_raw",
            "put that",
        ),
        "commerce replay": (
            _commerce(shop_replay),
            shop_replay.progress,
            "replay_v7_commerce:",
            "replay_v7.order_events",
            again,
        ),
        "changelog": (_changelog, CDC_PROGRESS, "cdc:", "ops.cdc_progress", "put that"),
    }


@pytest.mark.parametrize("stream", list(_streams()))
def test_each_stream_refuses_another_checkpoint_s_tables_before_it_reads_its_topics(
    spark, local_settings: Settings, stream: str
) -> None:
    start, progress, prefix, output, fix = _streams()[stream]
    batch_of_another_query(spark, local_settings, progress, f"{prefix}an-earlier-query")
    with pytest.raises(OtherCheckpointError) as refused:
        start(spark, local_settings)
    said = str(refused.value)
    assert said.startswith(f"{output} holds what another checkpoint's query wrote "), said
    assert f"({prefix}an-earlier-query)" in said and fix in said, said
    assert not spark.streams.active
