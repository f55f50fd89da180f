"""What the demo prints of its join part."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest

from lakehouse.ops.demo_joins import JoinsReport


def test_the_join_part_shows_matches_revenue_and_the_verdict() -> None:
    hour = datetime(2026, 12, 5, 6, tzinfo=UTC)
    report = JoinsReport(
        None,
        matches=(("user", "matched", 380), ("user", "not_yet", 2), ("product", "no_key", 200)),
        revenue=(
            {
                "window_start": hour,
                "segment": "vip",
                "category": "garden",
                "purchases": 3,
                "revenue": Decimal("120.50"),
            },
        ),
        verdict="judge: 382 events and 9 windows equal their recompute",
        batch="batch.revenue_by_segment: 4 rows recomputed for [...)",
    )
    lines = report.lines()
    assert lines[1] == "    users:    matched 380, not_yet 2"
    assert lines[2] == "    products: no_key 200"
    assert "2026-12-05 06:00  vip        garden            3 purchases      120.50" in lines[4]
    assert lines[-2:] == [
        "    judge: 382 events and 9 windows equal their recompute",
        "    batch.revenue_by_segment: 4 rows recomputed for [...)",
    ]


def test_a_part_that_could_not_run_is_one_line() -> None:
    lines = JoinsReport(failed="it needs the change data capture part's history tables").lines()
    assert lines == [
        "==> stream-table join: not shown: it needs the change data capture part's history tables"
    ]


@pytest.mark.slow  # Spark
def test_the_batch_line_recomputes_the_last_hour_and_counts_the_served_rows(
    spark, local_settings
) -> None:
    from datetime import timedelta

    from lakehouse.core.delta_io import append_once
    from lakehouse.core.tables import table
    from lakehouse.ops.demo_joins import revenue_batch
    from lakehouse.transforms.bronze import to_raw_records
    from tests.micro_batches import kafka_records

    hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=1)
    events = [
        (
            "u1",
            {
                "event_id": f"e{n}",
                "event_type": "purchase",
                "user_id": "u1",
                "page": "/checkout",
                "product_id": "p1",
                "amount": 2,
                "event_time": f"{hour + timedelta(minutes=n):%Y-%m-%dT%H:%M:%S}Z",
            },
        )
        for n in range(3)
    ]
    records = kafka_records(spark, events, 0).transform(to_raw_records)
    append_once(records, table("bronze.events_raw"), local_settings, "speed", 0)
    said: list[str] = []

    line = revenue_batch(spark, local_settings.model_copy(update={"mode": "lambda"}), said.append)

    # No history yet: the three purchases are one row, under the reasons. Whether it is final
    # yet depends on the clock (the watermark), so is where serving takes it from.
    recomputed = f"1 rows recomputed for [{hour:%Y-%m-%dT%H:%MZ}"
    assert line.startswith(f"batch.revenue_by_segment: {recomputed}"), line
    assert "`tributary query revenue_by_segment` serves " in line, line
    assert said == [
        f"==> batch layer: recomputing the revenue view for [{hour:%Y-%m-%dT%H:%MZ}, "
        f"{hour + timedelta(hours=1):%Y-%m-%dT%H:%MZ})"
    ]
    kappa = local_settings.model_copy(update={"mode": "kappa"})
    assert revenue_batch(spark, kappa, said.append) == ""
