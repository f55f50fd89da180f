"""The joins' and commerce tables' suites: a clean table passes, each defect breaks its check.

Tables are built in code from the registry's schemas, each with exactly one defect (or none).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest

from lakehouse.core.frames import rows_frame
from lakehouse.core.tables import table
from lakehouse.quality.suites import Action, suite_for
from lakehouse.quality.validate import Verdict, validate_dataframe

pytestmark = pytest.mark.slow  # make test-fast leaves it out (docs/testing.md)

T = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
MINUTE = timedelta(minutes=1)


def enriched(n: int = 0, **changes: Any) -> dict[str, Any]:
    return {
        "event_id": f"e-{n}",
        "event_type": "purchase",
        "user_id": "u1",
        "product_id": "p1",
        "amount": Decimal("9.99"),
        "event_time": T + n * MINUTE,
        "event_date": T.date(),
        "category": "books",
        "list_price": Decimal("9.99"),
        "product_match": "matched",
        "product_version_lsn": 10,
        "segment": "gold",
        "country": "DE",
        "user_match": "matched",
        "user_version_lsn": 11,
        "enriched_batch": 0,
        "corrected": False,
        **changes,
    }


def revenue(**changes: Any) -> dict[str, Any]:
    return {
        "window_start": T,
        "window_end": T + 60 * MINUTE,
        "segment": "gold",
        "category": "books",
        "purchases": 2,
        "revenue": Decimal("19.98"),
        "batch_id": 0,
        **changes,
    }


def order_event(n: int = 0, **changes: Any) -> dict[str, Any]:
    return {
        "event_id": f"oe-{n}",
        "order_id": "o1",
        "user_id": "u1",
        "type": "placed" if n == 0 else "paid",
        "amount": Decimal("30.00") if n == 0 else None,
        "event_time": T + n * MINUTE,
        "sent_at": T + n * MINUTE,
        "kafka_partition": 0,
        "kafka_offset": n,
        "kafka_timestamp": T + n * MINUTE,
        "ingested_at": T + n * MINUTE,
        **changes,
    }


def payment(n: int = 0, **changes: Any) -> dict[str, Any]:
    return {
        "payment_id": f"pay-{n}",
        "order_id": f"o{n}",
        "amount": Decimal("30.00"),
        "paid_at": T + n * MINUTE,
        "sent_at": T + n * MINUTE,
        "kafka_partition": 0,
        "kafka_offset": n,
        "kafka_timestamp": T + n * MINUTE,
        "ingested_at": T + n * MINUTE,
        **changes,
    }


def order_state(n: int = 0, **changes: Any) -> dict[str, Any]:
    return {
        "order_id": f"o{n}",
        "user_id": "u1",
        "status": "paid",
        "amount": Decimal("30.00"),
        "placed_at": T,
        "updated_at": T + MINUTE,
        "events_applied": 2,
        "rejected": 0,
        "last_event_id": f"oe-{n}",
        "kafka_partition": 0,
        "kafka_offset": n,
        **changes,
    }


def rejected(n: int = 0, **changes: Any) -> dict[str, Any]:
    return {
        "event_id": f"oe-{n}",
        "order_id": "o1",
        "type": "shipped",
        "from_status": "placed",
        "reason": "invalid_transition:placed->shipped",
        "event_time": T,
        "kafka_partition": 0,
        "kafka_offset": n,
        "rejected_at": T,
        **changes,
    }


def attribution(n: int = 0, **changes: Any) -> dict[str, Any]:
    return {
        "purchase_event_id": "e-p",
        "click_event_id": f"e-c{n}",
        "user_id": "u1",
        "product_id": "p1",
        "amount": Decimal("9.99"),
        "purchase_time": T,
        "click_time": T - (n + 1) * MINUTE,
        "seconds_before": (n + 1) * 60,
        "batch_id": 0,
        **changes,
    }


def order_payment(n: int = 0, **changes: Any) -> dict[str, Any]:
    return {
        "order_id": f"o{n}",
        "user_id": "u1",
        "order_amount": Decimal("30.00"),
        "placed_at": T,
        "payment_id": f"pay-{n}",
        "payment_amount": Decimal("30.00"),
        "paid_at": T + MINUTE,
        "paid": True,
        "batch_id": 0,
        **changes,
    }


def batch_revenue(**changes: Any) -> dict[str, Any]:
    row = {**revenue(), "users_version": 3, "products_version": None}
    del row["batch_id"]  # one final row per key
    return {**row, **changes}


UNPAID = {"payment_id": None, "payment_amount": None, "paid_at": None, "paid": False}


def user_orders(n: int = 0, **changes: Any) -> dict[str, Any]:
    return {
        "user_id": f"u{n}",
        "segment": "gold",
        "country": "DE",
        "orders": 2,
        "spend": Decimal("60.00"),
        "last_order_at": T,
        "users_lsn": 5,
        "orders_lsn": 7,
        **changes,
    }


CLEAN = {
    "silver.events_enriched": [
        enriched(0),
        enriched(0, enriched_batch=1, corrected=True, segment="silver"),
        enriched(
            1, product_match="deleted", category=None, list_price=None, product_version_lsn=None
        ),
    ],
    "speed.revenue_by_segment": [
        revenue(),
        revenue(batch_id=1, purchases=-1, revenue=Decimal("-9.99")),
    ],
    "batch.revenue_by_segment": [
        batch_revenue(),
        batch_revenue(segment="(unknown)", purchases=1, revenue=Decimal("0.00")),
    ],
    "silver.order_events": [order_event(0), order_event(1)],
    "silver.payments": [payment(0), payment(1)],
    "silver.order_state": [
        order_state(0),
        order_state(1, status="placed", events_applied=1),
        order_state(2, status="none", events_applied=0, rejected=1, placed_at=None, user_id=None),
    ],
    "silver.order_transitions_rejected": [rejected(0), rejected(1)],
    "silver.purchase_attribution": [attribution(0), attribution(1)],
    "silver.order_payments": [order_payment(0), order_payment(1, **UNPAID)],
    "silver.user_orders": [
        user_orders(0),
        user_orders(1, orders=0, spend=Decimal(0), last_order_at=None),
    ],
}

# (table, rows with one defect, the check it breaks)
DEFECTS = [
    ("silver.events_enriched", [enriched(0), enriched(0)], "one_row_per_event_and_batch"),
    ("silver.events_enriched", [enriched(0, corrected=True)], "corrections_follow_a_first_row"),
    (
        "silver.events_enriched",
        [enriched(0, user_match="lost", segment=None, country=None)],
        "user_match_known",
    ),
    (
        "silver.events_enriched",
        [enriched(0, product_version_lsn=None)],
        "matched_names_its_version",
    ),
    ("silver.events_enriched", [enriched(0, user_match="unknown")], "unmatched_has_no_columns"),
    (
        "speed.revenue_by_segment",
        [revenue(), revenue(batch_id=1, purchases=-3)],
        "summed_partials_not_negative",
    ),
    ("speed.revenue_by_segment", [revenue(window_end=T + MINUTE)], "window_is_an_hour"),
    ("batch.revenue_by_segment", [batch_revenue(), batch_revenue()], "one_row_per_key"),
    ("batch.revenue_by_segment", [batch_revenue(purchases=0)], "purchases_counted"),
    ("batch.revenue_by_segment", [batch_revenue(window_end=T)], "window_is_an_hour"),
    ("silver.order_events", [order_event(0), order_event(1, event_id="oe-0")], "event_id_unique"),
    ("silver.order_events", [order_event(0, type="returned")], "type_known"),
    ("silver.order_events", [order_event(0, amount=None)], "placed_has_an_amount"),
    ("silver.payments", [payment(0), payment(1, payment_id="pay-0")], "payment_id_unique"),
    ("silver.payments", [payment(0, amount=Decimal("-1"))], "amount_not_negative"),
    ("silver.order_state", [order_state(0), order_state(0)], "order_id_unique"),
    ("silver.order_state", [order_state(0, status="lost")], "status_known"),
    ("silver.order_state", [order_state(0, events_applied=0)], "placed_orders_complete"),
    (
        "silver.order_state",
        [order_state(0, status="none", rejected=0)],
        "unplaced_orders_applied_nothing",
    ),
    ("silver.order_transitions_rejected", [rejected(0, reason=" ")], "reason_not_empty"),
    ("silver.order_transitions_rejected", [rejected(0), rejected(0)], "event_id_unique"),
    (
        "silver.purchase_attribution",
        [attribution(0), attribution(0)],
        "purchase_event_id_click_event_id_unique",
    ),
    ("silver.purchase_attribution", [attribution(0, seconds_before=5)], "click_before_purchase"),
    ("silver.order_payments", [order_payment(0, paid=False)], "paid_means_a_payment"),
    (
        "silver.order_payments",
        [order_payment(0), order_payment(0)],
        "one_row_per_order_and_payment",
    ),
    (
        "silver.order_payments",
        [order_payment(0), order_payment(0, **UNPAID)],
        "unpaid_or_paid_not_both",
    ),
    ("silver.user_orders", [user_orders(0), user_orders(0)], "user_id_unique"),
    ("silver.user_orders", [user_orders(0, last_order_at=None)], "no_orders_no_last_order"),
]


def run(spark, name: str, rows: list[dict[str, Any]]):
    frame = rows_frame(spark, [tuple(r.values()) for r in rows], table(name).schema)
    return validate_dataframe(frame, suite_for(name), cache=True, examples=0)


@pytest.mark.parametrize("name", sorted(CLEAN))
def test_a_clean_table_passes(spark, name: str) -> None:
    result = run(spark, name, CLEAN[name])
    assert [c.check for c in result.broken()] == []
    assert result.verdict is Verdict.PASSED


@pytest.mark.parametrize(("name", "rows", "check"), DEFECTS, ids=[d[2] for d in DEFECTS])
def test_a_defect_breaks_its_check_and_fails_the_run(spark, name, rows, check) -> None:
    result = run(spark, name, rows)
    assert {c.check: c.action for c in result.broken()} == {check: Action.FAIL}
    assert result.verdict is Verdict.FAILED
