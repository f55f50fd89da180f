"""The view registry agrees with the table registry and with the DAGs that name views."""

from __future__ import annotations

import ast

import pytest

from lakehouse.core.frames import rows_frame
from lakehouse.core.paths import REPO_ROOT
from lakehouse.core.tables import BATCH, SPEED, TABLES
from lakehouse.transforms.views import VIEWS, UnknownViewError, view


def test_every_view_has_a_speed_table_and_a_batch_table_with_their_own_writers() -> None:
    for v in VIEWS.values():
        assert TABLES[v.speed_table].writer == SPEED
        assert TABLES[v.batch_table].writer == BATCH


def test_the_batch_layer_writes_no_table_the_stream_writes() -> None:
    batch_tables = {t.name for t in TABLES.values() if t.writer == BATCH}
    assert batch_tables == {v.batch_table for v in VIEWS.values()} | {
        "ops.batch_runs",
        "batch.first_deliveries",
        "batch.redeliveries",
        "batch.revenue_by_segment",  # lakehouse.joins.batch
    }


def test_an_unknown_view_lists_the_known_ones() -> None:
    with pytest.raises(UnknownViewError) as err:
        view("revenue_by_moon_phase")
    assert "event_counts_1m" in str(err.value)


def test_the_batch_dag_names_every_view() -> None:
    # The DAG file keeps its own list (it imports no lakehouse code at parse time).
    tree = ast.parse((REPO_ROOT / "dags" / "batch_layer.py").read_text())
    [listed] = [
        ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "VIEWS"
    ]
    assert listed == list(VIEWS)


def test_every_view_computes_from_the_input_columns_alone(spark) -> None:
    # The batch layer drops every other event column before its dedup and cache.
    from datetime import datetime
    from decimal import Decimal

    from lakehouse.transforms.views import VIEW_INPUT_COLUMNS

    events = rows_frame(
        spark,
        [(datetime(2026, 3, 1, 10, 0), "purchase", "u1", "/", Decimal("1.50"))],
        "event_time timestamp, event_type string, user_id string, page string, "
        "amount decimal(18,2)",
    )
    assert tuple(events.columns) == VIEW_INPUT_COLUMNS
    for v in VIEWS.values():
        assert v.compute(events).count() >= 1, v.name
