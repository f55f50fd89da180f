"""The commerce contracts and the order lifecycle fold (lakehouse.transforms.commerce): one
case per quarantine reason, the first delivery per id, the lifecycle's transitions applied or
rejected, log order over event time, and a random log folded in one batch equal to the same
log folded in many small batches and to a fold written in plain Python."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from pyspark.sql import functions as F

from lakehouse.core import commerce as contract
from lakehouse.core.frames import rows_frame
from lakehouse.transforms.commerce import (
    accepted_order_events,
    accepted_payments,
    empty_state,
    first_deliveries,
    fold_log,
    fold_order_events,
    not_seen,
    quarantined_records,
    rejection_rows,
    state_rows,
    validate_records,
)
from lakehouse.transforms.validate import ValidationRules

pytestmark = pytest.mark.slow  # make test-fast leaves it out (docs/testing.md)

KAFKA_TIME = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
RAW = (
    "key binary, value binary, topic string, partition int, offset long, "
    "kafka_timestamp timestamp, ingested_at timestamp"
)
RULES = ValidationRules(max_record_bytes=1024, future_tolerance_seconds=300)


def utc(moment: datetime) -> datetime:
    """A timestamp Spark returned (naive, in the session's zone: UTC) as an aware one."""
    return moment.replace(tzinfo=UTC)


def iso(minutes: float) -> str:
    return (KAFKA_TIME + timedelta(minutes=minutes)).isoformat().replace("+00:00", "Z")


def order_event(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "event_id": "e-1",
        "order_id": "o1",
        "user_id": "u0001",
        "type": "placed",
        "amount": 12.5,
        "event_time": iso(-5),
        "sent_at": iso(-5),
    }
    base.update(overrides)
    return {k: v for k, v in base.items() if v is not ...}


def payment(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "payment_id": "pay-1",
        "order_id": "o1",
        "amount": 12.5,
        "paid_at": iso(-1),
        "sent_at": iso(-1),
    }
    base.update(overrides)
    return {k: v for k, v in base.items() if v is not ...}


def raw_rows(spark, values: list[Any], key: bytes | None = b"o1", topic: str = "order-events"):
    """Bronze rows of partition 0, offsets 0..; a value is a dict (sent as JSON), text or
    bytes; a (key, value) pair gives the record its own key."""
    rows = []
    for offset, value in enumerate(values):
        record_key, body = value if isinstance(value, tuple) else (key, value)
        if isinstance(body, dict):
            body = json.dumps(body)
        if isinstance(body, str):
            body = body.encode()
        rows.append((record_key, body, topic, 0, offset, KAFKA_TIME, KAFKA_TIME))
    return rows_frame(spark, rows, RAW)


def reasons_of(spark, spec, values, key: bytes | None = b"o1") -> list[list[str]]:
    validated = raw_rows(spark, values, key).transform(validate_records, spec, RULES)
    return [r["reasons"] for r in validated.orderBy("offset").select("reasons").collect()]


ORDER_EVENT_CASES = [
    (order_event(), []),
    (order_event(type="shipped", amount=...), []),
    ('{"event_id": "e-1", "order_id": ', ["malformed_json"]),
    ("[1, 2]", ["malformed_json"]),
    # One JSON object and nothing else (lakehouse.transforms.json_text).
    (json.dumps(order_event()) + " and more", ["malformed_json"]),
    (json.dumps(order_event()) * 2, ["malformed_json"]),
    (json.dumps(order_event()).replace('"', "'"), ["malformed_json"]),
    (b"\xff\xfe not utf-8", ["invalid_utf8"]),
    (order_event(event_id=...), ["missing_field:event_id"]),
    (order_event(user_id=""), ["missing_field:user_id"]),
    (order_event(type=None), ["missing_field:type"]),
    (order_event(event_time=""), ["missing_field:event_time"]),
    (order_event(event_id=7), ["wrong_type:event_id"]),
    (order_event(event_time="2026-03-01"), ["wrong_type:event_time"]),
    (order_event(sent_at=17), ["wrong_type:sent_at"]),
    (order_event(amount="12.50"), ["wrong_type:amount"]),
    (order_event(type="refunded"), ["invalid_value:type"]),
    (order_event(amount=...), ["missing_field:amount"]),
    (order_event(amount=-1), ["invalid_value:amount"]),
    (order_event(event_time=iso(6)), ["event_time_in_future"]),
    (order_event(order_id="o2"), ["key_mismatch"]),
    (order_event(note="x" * 1100), ["oversized_record"]),
    (order_event(event_id=..., amount=-1), ["missing_field:event_id", "invalid_value:amount"]),
]


def test_every_order_event_rule_has_its_reason(spark) -> None:
    values = [value for value, _ in ORDER_EVENT_CASES]
    assert reasons_of(spark, contract.ORDER_EVENT, values) == [r for _, r in ORDER_EVENT_CASES]


PAYMENT_CASES = [
    (payment(), []),
    (payment(sent_at=...), []),
    ("{", ["malformed_json"]),
    (json.dumps(payment()) + "}", ["malformed_json"]),
    (json.dumps(payment()).replace("12.5", "NaN"), ["malformed_json"]),
    (payment(payment_id=...), ["missing_field:payment_id"]),
    (payment(order_id=...), ["missing_field:order_id"]),
    (payment(amount=...), ["missing_field:amount"]),
    (payment(amount=True), ["wrong_type:amount"]),
    (payment(paid_at=...), ["missing_field:paid_at"]),
    (payment(paid_at="now"), ["wrong_type:paid_at"]),
    (payment(amount=-0.01), ["invalid_value:amount"]),
    (payment(paid_at=iso(30)), ["paid_at_in_future"]),
    (payment(order_id="o9"), ["key_mismatch"]),
]


def test_every_payment_rule_has_its_reason(spark) -> None:
    values = [value for value, _ in PAYMENT_CASES]
    assert reasons_of(spark, contract.PAYMENT, values) == [r for _, r in PAYMENT_CASES]


def test_a_record_without_key_does_not_match_its_order(spark) -> None:
    assert reasons_of(spark, contract.PAYMENT, [payment()], key=None) == [["key_mismatch"]]


def test_accepted_rows_are_typed_and_the_others_quarantined_as_received(spark) -> None:
    bad = b'{"event_id": "e-2", '
    validated = raw_rows(spark, [order_event(), bad]).transform(
        validate_records, contract.ORDER_EVENT, RULES
    )
    [row] = accepted_order_events(validated).collect()
    assert (row["event_id"], row["type"], row["amount"]) == ("e-1", "placed", Decimal("12.50"))
    assert utc(row["event_time"]) == KAFKA_TIME - timedelta(minutes=5)
    assert (row["kafka_partition"], row["kafka_offset"]) == (0, 0)
    [broken] = quarantined_records(validated).collect()
    assert (broken["value"], broken["kafka_offset"]) == (bad, 1)
    assert (broken["reasons"], broken["reason"]) == (["malformed_json"], "malformed_json")

    paid = raw_rows(spark, [payment(amount=3)], topic="payments").transform(
        validate_records, contract.PAYMENT, RULES
    )
    [row] = accepted_payments(paid).collect()
    assert (row["payment_id"], row["amount"], utc(row["paid_at"])) == (
        "pay-1",
        Decimal("3.00"),
        KAFKA_TIME - timedelta(minutes=1),
    )


def test_the_first_delivery_in_the_log_wins_and_earlier_ids_are_left_out(spark) -> None:
    values = [
        order_event(event_id="e-1", amount=1),
        order_event(event_id="e-2", amount=2),
        order_event(event_id="e-1", amount=99),  # a later, conflicting delivery
    ]
    accepted = accepted_order_events(
        raw_rows(spark, values).transform(validate_records, contract.ORDER_EVENT, RULES)
    )
    firsts = first_deliveries(accepted, "event_id")
    assert sorted((r["event_id"], r["amount"]) for r in firsts.collect()) == [
        ("e-1", Decimal("1.00")),
        ("e-2", Decimal("2.00")),
    ]
    seen = accepted.where(F.col("event_id") == "e-2")
    assert [r["event_id"] for r in not_seen(firsts, seen, "event_id").collect()] == ["e-1"]


# --- the fold ---------------------------------------------------------------------------

EVENTS = (
    "event_id string, order_id string, user_id string, type string, amount decimal(18,2), "
    "event_time timestamp, sent_at timestamp, kafka_partition int, kafka_offset bigint, "
    "kafka_timestamp timestamp, ingested_at timestamp"
)


def events_frame(spark, events: list[tuple[str, str, str, float]], first_offset: int = 0):
    """(event_id, order_id, type, event_time minutes) -> accepted events in log order."""
    rows = []
    for i, (event_id, order, kind, minutes) in enumerate(events):
        at = KAFKA_TIME + timedelta(minutes=minutes)
        amount = Decimal("10.00") if kind == "placed" else None
        offset = first_offset + i
        rows.append((event_id, order, "u0001", kind, amount, at, at, 0, offset, at, at))
    return rows_frame(spark, rows, EVENTS)


def folded(spark, events, previous=None):
    return fold_order_events(events, previous if previous is not None else empty_state(spark))


def by_order(rows) -> dict[str, dict[str, Any]]:
    return {r["order_id"]: r.asDict() for r in rows.collect()}


def test_the_lifecycle_applies_allowed_transitions_and_rejects_the_others(spark) -> None:
    log = [
        ("a1", "a", "placed", 0),
        ("a2", "a", "paid", 1),
        ("a3", "a", "shipped", 2),
        ("a4", "a", "delivered", 3),
        ("b1", "b", "placed", 0),
        ("b2", "b", "cancelled", 1),
        ("b3", "b", "paid", 2),  # paid after cancelled
        ("c1", "c", "placed", 0),
        ("c2", "c", "shipped", 1),  # shipped before paid
        ("c3", "c", "placed", 2),  # a second placed
        ("d1", "d", "paid", 0),  # an order never placed
    ]
    result = folded(spark, events_frame(spark, log)).cache()
    state = by_order(state_rows(result))
    assert {o: (s["status"], s["events_applied"], s["rejected"]) for o, s in state.items()} == {
        "a": ("delivered", 4, 0),
        "b": ("cancelled", 2, 1),
        "c": ("placed", 1, 2),
        "d": ("none", 0, 1),
    }
    a = state["a"]
    assert (a["user_id"], a["amount"], a["last_event_id"], a["kafka_offset"]) == (
        "u0001",
        Decimal("10.00"),
        "a4",
        3,
    )
    assert utc(a["placed_at"]) == KAFKA_TIME
    assert utc(a["updated_at"]) == KAFKA_TIME + timedelta(minutes=3)
    assert state["d"]["user_id"] is None and state["d"]["updated_at"] is None
    rejections = rejection_rows(result).collect()
    rejected = {r["event_id"]: (r["from_status"], r["reason"]) for r in rejections}
    assert rejected == {
        "b3": ("cancelled", "invalid_transition:cancelled->paid"),
        "c2": ("placed", "invalid_transition:placed->shipped"),
        "c3": ("placed", "invalid_transition:placed->placed"),
        "d1": ("none", "invalid_transition:none->paid"),
    }


def test_events_are_folded_in_log_order_never_by_event_time(spark) -> None:
    """The shipped reaches the log before the paid, though its event_time is later: it is
    rejected, and the paid that follows it in the log is applied."""
    log = [("x1", "x", "placed", 0), ("x3", "x", "shipped", 20), ("x2", "x", "paid", 10)]
    result = folded(spark, events_frame(spark, log)).cache()
    [state] = state_rows(result).collect()
    assert (state["status"], state["last_event_id"], state["rejected"]) == ("paid", "x2", 1)
    assert [r["event_id"] for r in rejection_rows(result).collect()] == ["x3"]


def test_a_fold_continues_from_the_previous_state_rows(spark) -> None:
    first = state_rows(folded(spark, events_frame(spark, [("p1", "p", "placed", 0)])))
    then = events_frame(spark, [("p2", "p", "paid", 1), ("q1", "q", "placed", 1)], 1)
    state = by_order(state_rows(folded(spark, then, first.localCheckpoint())))
    assert (state["p"]["status"], state["p"]["events_applied"]) == ("paid", 2)
    assert utc(state["p"]["placed_at"]) == KAFKA_TIME
    assert (state["q"]["status"], state["q"]["events_applied"]) == ("placed", 1)


def python_fold(log: list[tuple[str, str, str, float]]) -> dict[str, tuple]:
    """The lifecycle in plain Python: per order (status, applied, rejected, last event)."""
    orders: dict[str, list] = {}
    for event_id, order, kind, _ in log:
        status, applied, rejected, last = orders.get(order, ["none", 0, 0, None])
        if contract.allowed(status, kind):
            orders[order] = [kind, applied + 1, rejected, event_id]
        else:
            orders[order] = [status, applied, rejected + 1, last]
    return {order: tuple(values) for order, values in orders.items()}


def random_log(rng: random.Random, size: int) -> list[tuple[str, str, str, float]]:
    """Events of a few orders: mostly lifecycles in order, with events out of place."""
    log = []
    for i in range(size):
        kind = rng.choices(contract.ORDER_EVENT_TYPES, weights=(4, 3, 2, 2, 1))[0]
        log.append((f"r{i}", f"o{rng.randint(1, 6)}", kind, rng.uniform(0, 60)))
    return log


def summary(state) -> dict[str, tuple]:
    return {
        r["order_id"]: (r["status"], r["events_applied"], r["rejected"], r["last_event_id"])
        for r in state.collect()
    }


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_log_folded_in_one_batch_equals_it_folded_in_many(spark, seed: int) -> None:
    rng = random.Random(seed)
    log = random_log(rng, 40)
    whole = fold_log(events_frame(spark, log)).cache()
    expected = python_fold(log)
    assert summary(state_rows(whole)) == expected

    state = empty_state(spark)
    rejected: list[str] = []
    start = 0
    while start < len(log):
        size = rng.randint(1, 9)
        batch = events_frame(spark, log[start : start + size], start)
        result = folded(spark, batch, state).localCheckpoint()
        touched = state_rows(result)
        state = state.join(touched.select("order_id"), "order_id", "left_anti").unionByName(touched)
        state = state.localCheckpoint()
        rejected += [r["event_id"] for r in rejection_rows(result).collect()]
        start += size
    assert summary(state) == expected
    assert sorted(state.collect()) == sorted(state_rows(whole).collect())
    assert sorted(rejected) == sorted(r["event_id"] for r in rejection_rows(whole).collect())
