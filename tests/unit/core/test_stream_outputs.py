"""A stream's outputs belong to its checkpoint: the check passes while every batch its progress
table records is its own checkpoint's query's (or none is), and names the other query when
one is not; `where` keeps one query's rows of a shared progress table."""

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
