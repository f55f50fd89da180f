"""What the demo prints of its join part."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

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
    )
    lines = report.lines()
    assert lines[1] == "    users:    matched 380, not_yet 2"
    assert lines[2] == "    products: no_key 200"
    assert "2026-12-05 06:00  vip        garden            3 purchases      120.50" in lines[4]
    assert lines[-1] == "    judge: 382 events and 9 windows equal their recompute"


def test_a_part_that_could_not_run_is_one_line() -> None:
    lines = JoinsReport(failed="it needs the change data capture part's history tables").lines()
    assert lines == [
        "==> stream-table join: not shown: it needs the change data capture part's history tables"
    ]
