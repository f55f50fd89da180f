"""The windowed joins' conditions on static frames (lakehouse.transforms.stream_joins): the
window bounds, inner against left outer, duplicated and second payments, unknown orders, and
a property check against a plain Python reference on random inputs."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from lakehouse.core.frames import rows_frame
from lakehouse.core.tables import table
from lakehouse.transforms.stream_joins import (
    attribute_purchases,
    clicks_of,
    join_payments,
    orders_of,
    payments_of,
    purchases_of,
)

T0 = datetime(2026, 11, 25, 10, 0, tzinfo=UTC)
EVENTS = table("silver.events").schema
ORDER_EVENTS = table("silver.order_events").schema
PAYMENTS = table("silver.payments").schema
HALF_HOUR = 1800
HOUR = 3600


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def events(spark, rows: list[tuple[str, str, str, str, float]]):
    """(event_id, event_type, user_id, product_id, second)."""
    return rows_frame(
        spark,
        [
            {
                "event_id": e,
                "event_type": kind,
                "user_id": user,
                "product_id": product,
                "amount": Decimal("2.50"),
                "event_time": at(s),
            }
            for e, kind, user, product, s in rows
        ],
        EVENTS,
    )


def orders(spark, rows: list[tuple[str, str, float]]):
    """(order_id, type, second)."""
    return rows_frame(
        spark,
        [
            {
                "event_id": f"{o}-{kind}-{s}",
                "order_id": o,
                "user_id": "u1",
                "type": kind,
                "amount": Decimal("10.00"),
                "event_time": at(s),
            }
            for o, kind, s in rows
        ],
        ORDER_EVENTS,
    )


def payments(spark, rows: list[tuple[str, str, float]]):
    """(payment_id, order_id, second)."""
    return rows_frame(
        spark,
        [
            {"payment_id": p, "order_id": o, "amount": Decimal("10.00"), "paid_at": at(s)}
            for p, o, s in rows
        ],
        PAYMENTS,
    )


def attributed(spark, rows) -> list[tuple[str, str, int]]:
    frame = events(spark, rows)
    joined = attribute_purchases(purchases_of(frame), clicks_of(frame), HALF_HOUR)
    return sorted(
        (r["purchase_event_id"], r["click_event_id"], r["seconds_before"]) for r in joined.collect()
    )


def paid(spark, order_rows, payment_rows) -> list[tuple[str, str | None, bool]]:
    joined = join_payments(
        orders_of(orders(spark, order_rows)), payments_of(payments(spark, payment_rows)), HOUR
    )
    return sorted(
        ((r["order_id"], r["payment_id"], r["paid"]) for r in joined.collect()),
        key=lambda r: (r[0], r[1] or ""),
    )


def test_attribution_takes_the_clicks_of_the_half_hour_before_bounds_included(spark) -> None:
    rows = [
        ("b", "purchase", "u1", "p1", 3600),
        ("at-start", "click", "u1", "p1", 1800),  # exactly 30 minutes before: in
        ("too-early", "click", "u1", "p1", 1799.999),
        ("same-instant", "click", "u1", "p1", 3600),  # at the purchase's instant: in
        ("after", "click", "u1", "p1", 3600.001),
        ("other-product", "click", "u1", "p2", 3000),
        ("other-user", "click", "u2", "p1", 3000),
        ("page-view", "page_view", "u1", "p1", 3000),
    ]
    assert attributed(spark, rows) == [("b", "at-start", 1800), ("b", "same-instant", 0)]


def test_attribution_is_inner_a_purchase_without_clicks_has_no_row(spark) -> None:
    rows = [
        ("b1", "purchase", "u1", "p1", 100),
        ("b2", "purchase", "u1", "p1", 200),
        ("c", "click", "u1", "p1", 150),
    ]
    # c is before b2 only; b1 has none and is not in the output
    assert attributed(spark, rows) == [("b2", "c", 50)]


def test_an_order_takes_its_payments_of_the_hour_after_it_bounds_included(spark) -> None:
    order_rows = [("o1", "placed", 0), ("o1", "shipped", 10), ("o2", "placed", 0)]
    payment_rows = [
        ("p-at-placing", "o1", 0),
        ("p-at-end", "o1", 3600),
        ("p-too-late", "o1", 3600.001),
        ("p-before", "o1", -0.001),
        ("p-unknown", "o9", 10),  # an order never placed: joins nothing
    ]
    assert paid(spark, order_rows, payment_rows) == [
        ("o1", "p-at-end", True),  # a second distinct payment is a second row
        ("o1", "p-at-placing", True),
        ("o2", None, False),  # left outer: unpaid, once, payment columns null
    ]


def test_a_payment_delivered_twice_is_one_row_of_silver_so_one_joined_row(spark) -> None:
    # silver.payments keeps the first delivery of a payment_id; the join sees it once
    assert paid(spark, [("o1", "placed", 0)], [("p1", "o1", 60)]) == [("o1", "p1", True)]
    joined = join_payments(
        orders_of(orders(spark, [("o1", "placed", 0)])),
        payments_of(payments(spark, [("p1", "o1", 60)])),
        HOUR,
    ).collect()
    [row] = joined
    assert row["payment_amount"] == Decimal("10.00") and row["paid_at"] == at(60).replace(
        tzinfo=None
    )


def test_the_joins_agree_with_a_python_reference_on_random_inputs(spark) -> None:
    rng = random.Random(32)
    event_rows = [
        (
            f"e{i}",
            rng.choice(["click", "click", "purchase", "page_view"]),
            rng.choice(["u1", "u2"]),
            rng.choice(["p1", "p2"]),
            rng.randrange(0, 4 * HOUR, 300),  # on a 5-minute grid: bounds are hit often
        )
        for i in range(60)
    ]
    expected_pairs = sorted(
        (b[0], c[0], b[4] - c[4])
        for b in event_rows
        if b[1] == "purchase"
        for c in event_rows
        if c[1] == "click" and (c[2], c[3]) == (b[2], b[3]) and b[4] - HALF_HOUR <= c[4] <= b[4]
    )
    assert expected_pairs and any(seconds in (0, HALF_HOUR) for _, _, seconds in expected_pairs)
    assert attributed(spark, event_rows) == expected_pairs

    order_rows = [(f"o{i}", "placed", rng.randrange(0, 4 * HOUR, 600)) for i in range(15)]
    placed = {o: s for o, _, s in order_rows}
    payment_rows = [
        (f"p{i}", f"o{rng.randrange(0, 18)}", rng.randrange(0, 6 * HOUR, 600)) for i in range(25)
    ]
    expected: list[tuple[str, str | None, bool]] = []
    for o, s in placed.items():
        mine = [p for p, po, ps in payment_rows if po == o and s <= ps <= s + HOUR]
        expected += [(o, p, True) for p in mine] or [(o, None, False)]
    assert paid(spark, order_rows, payment_rows) == sorted(
        expected, key=lambda r: (r[0], r[1] or "")
    )
