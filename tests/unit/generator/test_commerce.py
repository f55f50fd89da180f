"""The commerce generator (lakehouse.generator.commerce): the same seed gives the same records,
every kind it promises is there, each record's ledger fate is what the contract and the
lifecycle make of it, and payments mostly come within the hour after the order."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from datetime import UTC, datetime, timedelta

import pytest

from lakehouse.core import commerce as contract
from lakehouse.generator.commerce import (
    FATE_APPLIED,
    FATE_DUPLICATE,
    FATE_PAYMENT,
    FATE_QUARANTINE,
    FATE_REJECTED,
    ORDER_EVENTS,
    PAYMENTS,
    CommerceConfig,
    generate_commerce,
    produce,
)

START = datetime(2026, 11, 1, tzinfo=UTC)
CFG = CommerceConfig(orders=400, seed=5, start=START)


def at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def test_the_same_seed_gives_the_same_records_and_another_seed_others() -> None:
    first = generate_commerce(CFG)
    assert [r.value for r in generate_commerce(CFG).records] == [r.value for r in first.records]
    other = generate_commerce(CommerceConfig(orders=400, seed=6, start=START))
    assert [r.value for r in other.records] != [r.value for r in first.records]


def test_every_kind_the_generator_promises_is_there() -> None:
    kinds = Counter(r.ledger["kind"] for r in generate_commerce(CFG).records)
    expected = {"delivered", "in_transit", "cancelled", "shipped_before_paid"}
    expected |= {"paid_after_cancel", "duplicate", "payment", "late_payment"}
    expected |= {"duplicate_payment", "second_payment", "malformed"}
    assert expected <= set(kinds), kinds
    assert generate_commerce(CFG).missing_payments, "some paid orders have no payment"


def test_the_ledger_fates_follow_the_lifecycle_in_sending_order() -> None:
    generated = generate_commerce(CFG)
    status: dict[str, str] = defaultdict(lambda: contract.STATUS_NONE)
    seen: set[str] = set()
    for record in generated.records:
        entry, value = record.ledger, record.value
        if entry["expected"] == FATE_QUARANTINE:
            with pytest.raises(json.JSONDecodeError):
                json.loads(value)
            continue
        body = json.loads(value)
        assert record.key == body["order_id"], "keyed by order"
        fresh = entry["id"] not in seen
        seen.add(entry["id"])
        if entry["topic"] == PAYMENTS:
            assert entry["expected"] == (FATE_PAYMENT if fresh else FATE_DUPLICATE)
            continue
        if not fresh:
            assert entry["expected"] == FATE_DUPLICATE
            continue
        order, kind = body["order_id"], body["type"]
        if contract.allowed(status[order], kind):
            assert entry["expected"] == FATE_APPLIED
            status[order] = kind
        else:
            assert entry["expected"] == FATE_REJECTED
            assert entry["reason"] == contract.rejection_reason(status[order], kind)
    assert {o: s["status"] for o, s in generated.states.items()} == dict(status)
    reasons = {r.ledger["reason"] for r in generated.records if r.ledger["expected"] == "rejected"}
    assert reasons == {
        "invalid_transition:placed->shipped",
        "invalid_transition:cancelled->paid",
    }


def test_records_are_sent_in_time_order_and_payments_mostly_within_the_hour() -> None:
    generated = generate_commerce(CFG)
    sent = [at(json.loads(r.value)["sent_at"]) for r in generated.records if r.ledger["id"]]
    assert sent == sorted(sent)
    placed = {
        body["order_id"]: at(body["event_time"])
        for body in (json.loads(r.value) for r in generated.records if r.ledger["id"])
        if body.get("type") == "placed"
    }
    delays = [
        at(body["paid_at"]) - placed[body["order_id"]]
        for r in generated.records
        if r.topic == PAYMENTS and r.ledger["kind"] in ("payment", "late_payment")
        for body in [json.loads(r.value)]
    ]
    within = sum(1 for d in delays if d <= timedelta(hours=1))
    assert within > 0.8 * len(delays), "mostly within the hour"
    assert any(d > timedelta(hours=1) for d in delays), "some late"
    events = [r for r in generated.records if r.topic == ORDER_EVENTS and r.ledger["id"]]
    users = {json.loads(r.value)["user_id"] for r in events}
    assert users and all("u0001" <= u <= "u0050" for u in users)


def test_a_config_out_of_range_is_refused_with_every_problem() -> None:
    with pytest.raises(ValueError, match=r"orders must be >= 1.*late_payments must be a fraction"):
        CommerceConfig(orders=0, seed=1, start=START, late_payments=2)


def test_records_that_would_be_in_the_future_are_refused_before_anything_is_sent(
    local_settings, tmp_path
) -> None:
    soon = CommerceConfig(orders=10, seed=1, start=datetime.now(UTC))
    with pytest.raises(ValueError, match="start them earlier"):
        produce(local_settings, soon, tmp_path / "ledger.jsonl")
    assert not (tmp_path / "ledger.jsonl").exists()
