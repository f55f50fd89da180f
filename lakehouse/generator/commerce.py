"""A deterministic generator of order lifecycles and their payments (the contracts:
lakehouse.core.commerce), each record paired with a ledger entry saying what the pipeline
must do with it, as the click-stream generator's (lakehouse.generator.clickstream).

Every order is placed by one of the click stream's users (u0001..) and then, by its share of
the orders: paid and shipped and delivered (or still on its way), cancelled (before or after
it was paid), or sent out of place: a shipped that reaches the log before its paid, or a paid
after the order was cancelled (the lifecycle refuses those). Payments come mostly within the
hour after the order was placed; some late (one to three hours after), some missing (the
order's paid event but no payment), some delivered twice (the same payment_id), some orders
paid twice (a second payment of their own). Some order events are delivered twice, and each
topic gets a few records cut short (malformed JSON).

Records are sent in the order of their `sent_at`, each order's under its order_id as the key,
so an order's records are in the log in the order the ledger lists them; what the lifecycle
does with each is worked out here in that order, with the contract's own TRANSITIONS.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lakehouse.core import commerce as contract
from lakehouse.core.events import REASON_MALFORMED
from lakehouse.core.paths import state_dir

if TYPE_CHECKING:
    from lakehouse.core.config import Settings

ORDER_EVENTS, PAYMENTS = "order_events", "payments"  # the ledger's names of the two topics
# What the pipeline must do with a record (the ledger's `expected`).
FATE_APPLIED = "applied"  # an order event in silver, applied to its order's state
FATE_REJECTED = "rejected"  # an order event in silver, its transition refused
FATE_PAYMENT = "payment"  # a payment in silver
FATE_DUPLICATE = "duplicate"
FATE_QUARANTINE = "quarantine"
FATES = (FATE_APPLIED, FATE_REJECTED, FATE_PAYMENT, FATE_DUPLICATE, FATE_QUARANTINE)

LIFECYCLES = ("delivered", "in_transit", "cancelled", "shipped_before_paid", "paid_after_cancel")


@dataclass(frozen=True)
class CommerceConfig:
    """What to generate: `orders` orders placed from `start`, one every 1..`spacing_s`
    seconds. Shares are of the orders (lifecycles, payments) or of the records sent
    (malformed); the rest are orders delivered or on their way, paid within the hour."""

    orders: int
    seed: int
    start: datetime
    users: int = 50
    spacing_s: int = 60
    cancelled: float = 0.15
    out_of_place: float = 0.08  # half shipped before paid, half paid after cancelled
    duplicate_events: float = 0.05
    missing_payments: float = 0.05
    late_payments: float = 0.1
    duplicate_payments: float = 0.05
    second_payments: float = 0.05
    malformed: float = 0.02

    def __post_init__(self) -> None:
        problems = []
        if self.orders < 1:
            problems.append(f"orders must be >= 1, got {self.orders}")
        if self.users < 1:
            problems.append(f"users must be >= 1, got {self.users}")
        if self.spacing_s < 1:
            problems.append(f"spacing_s must be >= 1, got {self.spacing_s}")
        if self.start.tzinfo is None:
            problems.append("start must be timezone-aware (UTC)")
        for name in SHARES:
            share = getattr(self, name)
            if not 0.0 <= share <= 1.0:
                problems.append(f"{name} must be a fraction in [0, 1], got {share}")
        if self.cancelled + self.out_of_place > 1:
            problems.append("cancelled + out_of_place must be at most 1")
        if problems:
            raise ValueError("invalid commerce generator config: " + "; ".join(problems))
        object.__setattr__(self, "start", self.start.astimezone(UTC))

    def last_moment(self) -> datetime:
        """No record's time is later: the last order placed, plus the longest lifecycle."""
        return self.start + timedelta(seconds=self.orders * self.spacing_s) + LONGEST


SHARES = (
    "cancelled",
    "out_of_place",
    "duplicate_events",
    "missing_payments",
    "late_payments",
    "duplicate_payments",
    "second_payments",
    "malformed",
)
# The longest an order's lifecycle lasts: paid up to 3 h after placed, shipped up to 6 h
# after that, delivered up to 24 h after that.
LONGEST = timedelta(hours=33, minutes=1)


@dataclass(frozen=True)
class GeneratedRecord:
    """One Kafka record (its topic by the ledger's name) and its ledger entry."""

    topic: str
    key: str
    value: bytes
    ledger: dict[str, Any]


def _iso(moment: datetime) -> str:
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _dumps(value: Mapping[str, Any]) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


class _Orders:
    def __init__(self, cfg: CommerceConfig) -> None:
        self.cfg = cfg
        self.rng = random.Random(cfg.seed)
        self.records: list[tuple[datetime, int, GeneratedRecord]] = []
        self.states: dict[str, dict[str, Any]] = {}
        self.missing_payments: set[str] = set()

    def add(self, topic: str, key: str, value: Mapping[str, Any], kind: str, **ledger: Any) -> None:
        sent = datetime.fromisoformat(str(value["sent_at"]).replace("Z", "+00:00"))
        entry = {"topic": topic, "kind": kind, "key": key, **ledger}
        record = GeneratedRecord(topic, key, _dumps(value), entry)
        self.records.append((sent, len(self.records), record))

    def event(
        self, order: str, user: str, kind: str, at: datetime, sent: datetime, amount: Any = None
    ) -> dict[str, Any]:
        value: dict[str, Any] = {
            "event_id": f"{order}-{kind}",
            "order_id": order,
            "user_id": user,
            "type": kind,
            "event_time": _iso(at),
            "sent_at": _iso(sent),
        }
        if amount is not None:
            value["amount"] = amount
        return value

    def order(self, index: int) -> None:
        cfg, rng = self.cfg, self.rng
        order = f"o{cfg.seed}-{index:06d}"
        user = f"u{rng.randint(1, cfg.users):04d}"
        placed = cfg.start + timedelta(seconds=index * cfg.spacing_s + rng.randint(0, 999) / 1000)
        total = round(rng.uniform(5, 500), 2)
        lifecycle = self._lifecycle()
        late = rng.random() < cfg.late_payments
        paid = placed + (
            timedelta(minutes=rng.uniform(61, 180))
            if late
            else timedelta(minutes=rng.uniform(1, 55))
        )
        shipped = paid + timedelta(hours=rng.uniform(1, 6))
        delivered = shipped + timedelta(hours=rng.uniform(1, 24))
        cancelled = placed + timedelta(minutes=rng.uniform(1, 30))
        # (type, event_time, sent_at): the order's events in the order they are sent.
        steps: list[tuple[str, datetime, datetime]] = [("placed", placed, placed)]
        is_paid = lifecycle in ("delivered", "in_transit", "shipped_before_paid")
        if lifecycle == "delivered":
            steps += [("paid", paid, paid), ("shipped", shipped, shipped)]
            steps += [("delivered", delivered, delivered)]
        elif lifecycle == "in_transit":
            steps += [("paid", paid, paid)]
            if rng.random() < 0.5:
                steps += [("shipped", shipped, shipped)]
        elif lifecycle == "cancelled":
            if rng.random() < 0.5:
                is_paid = True
                steps += [("paid", paid, paid), ("cancelled", shipped, shipped)]
            else:
                steps += [("cancelled", cancelled, cancelled)]
        elif lifecycle == "shipped_before_paid":
            # The warehouse's event reaches the log first; its own time is after the payment.
            steps += [("shipped", shipped, paid - timedelta(seconds=1)), ("paid", paid, paid)]
        else:  # paid_after_cancel: the payment comes through after the order was cancelled
            is_paid = True
            paid = cancelled + timedelta(minutes=rng.uniform(1, 20))
            steps += [("cancelled", cancelled, cancelled), ("paid", paid, paid)]
        for kind, at, sent in steps:
            value = self.event(order, user, kind, at, sent, total if kind == "placed" else None)
            fields = {"id": value["event_id"], "order_id": order, "type": kind}
            # Its fate (applied or rejected) is worked out in sending order (_judged).
            self.add(ORDER_EVENTS, order, value, lifecycle, **fields)
            if rng.random() < cfg.duplicate_events:
                again = value | {"sent_at": _iso(sent + timedelta(seconds=rng.uniform(1, 30)))}
                self.add(ORDER_EVENTS, order, again, "duplicate", expected=FATE_DUPLICATE, **fields)
        self._payments(order, total, paid, is_paid, late)
        self.states[order] = {"user_id": user, "status": contract.STATUS_NONE, "amount": total}

    def _lifecycle(self) -> str:
        cfg, draw = self.cfg, self.rng.random()
        if draw < cfg.cancelled:
            return "cancelled"
        if draw < cfg.cancelled + cfg.out_of_place:
            return "shipped_before_paid" if self.rng.random() < 0.5 else "paid_after_cancel"
        return "delivered" if self.rng.random() < 0.7 else "in_transit"

    def _payments(
        self, order: str, total: float, paid: datetime, is_paid: bool, late: bool
    ) -> None:
        cfg, rng = self.cfg, self.rng
        if not is_paid:
            return
        if rng.random() < cfg.missing_payments:
            self.missing_payments.add(order)
            return
        second = rng.random() < cfg.second_payments
        first_amount = round(total / 2, 2) if second else total
        kind = "late_payment" if late else "payment"
        self._payment(order, 1, first_amount, paid, kind)
        if second:
            later = paid + timedelta(minutes=rng.uniform(1, 5))
            self._payment(order, 2, round(total - first_amount, 2), later, "second_payment")

    def _payment(self, order: str, n: int, amount: float, at: datetime, kind: str) -> None:
        value = {
            "payment_id": f"pay-{order}-{n}",
            "order_id": order,
            "amount": amount,
            "paid_at": _iso(at),
            "sent_at": _iso(at),
        }
        fields = {"id": value["payment_id"], "order_id": order}
        self.add(PAYMENTS, order, value, kind, expected=FATE_PAYMENT, **fields)
        if self.rng.random() < self.cfg.duplicate_payments:
            self.add(PAYMENTS, order, value, "duplicate_payment", expected=FATE_DUPLICATE, **fields)

    def malformed(self, topic: str, index: int, at: datetime) -> None:
        """A record cut short: the first half of a valid-looking value."""
        order = f"o{self.cfg.seed}-bad{index:05d}"
        whole = _dumps({"order_id": order, "sent_at": _iso(at), "type": "placed"})
        record = GeneratedRecord(
            topic,
            order,
            whole[: len(whole) // 2],
            {
                "topic": topic,
                "kind": "malformed",
                "key": order,
                "expected": FATE_QUARANTINE,
                "reason": REASON_MALFORMED,
                "id": None,
                "order_id": None,
            },
        )
        self.records.append((at, len(self.records), record))


@dataclass(frozen=True)
class Generated:
    records: list[GeneratedRecord]  # in sending order
    states: dict[str, dict[str, Any]]  # order_id -> its final status, user and amount
    missing_payments: set[str]  # orders paid whose payment is never sent


def generate_commerce(cfg: CommerceConfig) -> Generated:
    """The records of `cfg`'s orders, in the order they are sent; the same config gives the
    same records."""
    orders = _Orders(cfg)
    for index in range(cfg.orders):
        orders.order(index)
    sent = sorted(orders.records, key=lambda r: (r[0], r[1]))
    span = sent[-1][0] - sent[0][0]
    for topic in (ORDER_EVENTS, PAYMENTS):
        bad = sum(1 for _, _, r in sent if r.topic == topic) * cfg.malformed
        for n in range(round(bad)):
            orders.malformed(topic, n, sent[0][0] + span * orders.rng.random())
    ordered = sorted(orders.records, key=lambda r: (r[0], r[1]))
    records = [record for _, _, record in ordered]
    for seq, record in enumerate(records):
        record.ledger["seq"] = seq
    _judged(records, orders.states)
    return Generated(records, orders.states, orders.missing_payments)


def _judged(records: list[GeneratedRecord], states: dict[str, dict[str, Any]]) -> None:
    """Each order event's fate as the lifecycle decides it in sending order (an order's
    records share a key, so the log keeps that order), and each order's final status."""
    for record in records:
        entry = record.ledger
        if entry["topic"] != ORDER_EVENTS or "expected" in entry:
            continue  # a payment, a duplicate, a malformed record: decided when made
        state = states[entry["order_id"]]
        if contract.allowed(state["status"], entry["type"]):
            state["status"] = entry["type"]
            entry.update(expected=FATE_APPLIED, reason=None)
        else:
            reason = contract.rejection_reason(state["status"], entry["type"])
            entry.update(expected=FATE_REJECTED, reason=reason)


def topic_of(settings: Settings, name: str) -> str:
    return (
        settings.kafka.order_events_topic if name == ORDER_EVENTS else settings.kafka.payments_topic
    )


def produce(
    settings: Settings, cfg: CommerceConfig, ledger_path: str | Path, now: datetime | None = None
) -> dict[str, Any]:
    """Send the records of `cfg` to the two topics and write the ledger (a JSON line per
    record, in sending order, with its topic, partition and offset); returns a summary.
    Refuses a config whose records would be in the future of `now` (the pipeline would
    quarantine them as such, not as the ledger says)."""
    from lakehouse.core.kafka_io import ensure_topic, produce_records

    moment = now or datetime.now(UTC)
    if cfg.last_moment() > moment:
        raise ValueError(
            f"the orders' lifecycles would end at {_iso(cfg.last_moment())}, after now "
            f"({_iso(moment)}): start them earlier (or make fewer orders)"
        )
    path = Path(ledger_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    generated = generate_commerce(cfg)
    by_topic: dict[str, list[GeneratedRecord]] = {ORDER_EVENTS: [], PAYMENTS: []}
    for record in generated.records:
        by_topic[record.topic].append(record)
    for name, records in by_topic.items():
        topic = ensure_topic(settings, topic_of(settings, name))
        payloads = ((r.key.encode(), r.value) for r in records)
        for record, meta in zip(records, produce_records(settings, payloads, topic), strict=True):
            record.ledger.update(partition=meta.partition, offset=meta.offset)
    with path.open("w") as ledger:
        for record in generated.records:
            ledger.write(json.dumps(record.ledger) + "\n")
    fates = Counter(r.ledger["expected"] for r in generated.records)
    kinds = Counter(r.ledger["kind"] for r in generated.records)
    return {
        "orders": cfg.orders,
        "sent": {name: len(records) for name, records in by_topic.items()},
        "topics": {name: topic_of(settings, name) for name in by_topic},
        "kinds": dict(sorted(kinds.items())),
        "expected": {fate: fates[fate] for fate in FATES},
        "missing_payments": len(generated.missing_payments),
        "ledger": str(path),
    }


def default_ledger(seed: int) -> Path:
    """Where a run's ledger goes unless told: the state folder's ledgers/, by time and seed."""
    return state_dir() / "ledgers" / f"{datetime.now(UTC):%Y%m%dT%H%M%SZ}-commerce-seed{seed}.jsonl"


def summary_lines(summary: Mapping[str, Any]) -> list[str]:
    """What `produce` sent, for a terminal or a task log."""
    sent, topics = summary["sent"], summary["topics"]
    return [
        f"==> {summary['orders']} orders: sent {sent[ORDER_EVENTS]} records to "
        f"{topics[ORDER_EVENTS]!r} and {sent[PAYMENTS]} to {topics[PAYMENTS]!r}",
        "    kinds:    " + " ".join(f"{k}={n}" for k, n in summary["kinds"].items()),
        "    expected: " + " ".join(f"{k}={n}" for k, n in summary["expected"].items()),
        f"    payments missing: {summary['missing_payments']} orders",
        f"    ledger:   {summary['ledger']}",
    ]
