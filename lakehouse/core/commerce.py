"""The commerce contracts: order lifecycle events and payments, and the lifecycle they follow.

Both are exactly one JSON object, UTF-8 (read as strictly as click events,
lakehouse.core.events), with the Kafka key = order_id, so that all of an order's
records share a partition and reach the log in the order they were sent:

Order events, topic `kafka.order_events_topic` (order-events):

    field       JSON type   rule
    event_id    string      required, unique per event (first delivery in the log wins)
    order_id    string      required, equal to the Kafka key
    user_id     string      required
    type        string      required, one of ORDER_EVENT_TYPES
    amount      number      required on placed (the order total); >= 0 whenever given
    event_time  string      required, ISO-8601 with a zone; at most
                            speed.future_tolerance_seconds after the Kafka timestamp
    sent_at     string      optional, ISO-8601 with a zone

Payments, topic `kafka.payments_topic` (payments):

    payment_id  string      required, unique per payment (first delivery in the log wins)
    order_id    string      required, equal to the Kafka key
    amount      number      required, >= 0
    paid_at     string      required, ISO-8601 with a zone, not in the future (as event_time)
    sent_at     string      optional, ISO-8601 with a zone

As for click events (lakehouse.core.events), the JSON types are part of the contract, a JSON
null counts as absent, and a record that breaks a rule goes to bronze.commerce_quarantine with
one reason per broken rule (the reason names are the click events' where the rule is the
same). `key_mismatch` is the commerce contracts' own: the order state is folded from an
order's events in log order, which is only the order they were sent in when all of them share
one key, hence one partition.

The lifecycle: an order event is applied to its order's state only when TRANSITIONS allows
going from the order's status to the event's type (an order not placed yet is STATUS_NONE).
Any other event (shipped before paid, a second placed, paid after cancelled, an event of an
order never placed) is not applied and is recorded in silver.order_transitions_rejected as
`invalid_transition:<status>-><type>`.
"""

from __future__ import annotations

from dataclasses import dataclass

from lakehouse.core.events import REASON_FUTURE

STRING, NUMBER, TIMESTAMP = "string", "number", "timestamp"


@dataclass(frozen=True)
class Contract:
    """One topic's record contract, as data the validation reads."""

    name: str
    fields: tuple[tuple[str, str], ...]  # (field, STRING | NUMBER | TIMESTAMP), in JSON order
    required: tuple[str, ...]
    id_field: str  # identifies a record: its first delivery in the log wins
    time_field: str  # must not be in the future (the Kafka timestamp's)
    future_reason: str

    @property
    def field_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.fields)

    def fields_of(self, kind: str) -> tuple[str, ...]:
        return tuple(name for name, k in self.fields if k == kind)


ORDER_EVENT_TYPES = ("placed", "paid", "shipped", "delivered", "cancelled")
PLACED = "placed"

ORDER_EVENT = Contract(
    name="order_event",
    fields=(
        ("event_id", STRING),
        ("order_id", STRING),
        ("user_id", STRING),
        ("type", STRING),
        ("amount", NUMBER),
        ("event_time", TIMESTAMP),
        ("sent_at", TIMESTAMP),
    ),
    required=("event_id", "order_id", "user_id", "type", "event_time"),
    id_field="event_id",
    time_field="event_time",
    future_reason=REASON_FUTURE,
)

PAYMENT = Contract(
    name="payment",
    fields=(
        ("payment_id", STRING),
        ("order_id", STRING),
        ("amount", NUMBER),
        ("paid_at", TIMESTAMP),
        ("sent_at", TIMESTAMP),
    ),
    required=("payment_id", "order_id", "amount", "paid_at"),
    id_field="payment_id",
    time_field="paid_at",
    future_reason="paid_at_in_future",
)

# Quarantine reasons beside the click events' (lakehouse.core.events: oversized_record,
# malformed_json, invalid_utf8, missing_field:<f>, wrong_type:<f>, invalid_value:amount,
# event_time_in_future), which mean the same here.
REASON_UNKNOWN_TYPE = "invalid_value:type"
REASON_PLACED_WITHOUT_AMOUNT = "missing_field:amount"
REASON_KEY_MISMATCH = "key_mismatch"
REASON_FUTURE_PAYMENT = PAYMENT.future_reason

# The lifecycle: (from status, to type) pairs an event may make.
STATUS_NONE = "none"
TRANSITIONS = (
    (STATUS_NONE, "placed"),
    ("placed", "paid"),
    ("placed", "cancelled"),
    ("paid", "shipped"),
    ("paid", "cancelled"),
    ("shipped", "delivered"),
)
REASON_INVALID_TRANSITION = "invalid_transition"  # invalid_transition:<from>-><type>


def transition(status: str, event_type: str) -> str:
    """How a transition is named, in TRANSITIONS and in a rejection's reason."""
    return f"{status}->{event_type}"


def allowed(status: str, event_type: str) -> bool:
    return (status, event_type) in TRANSITIONS


def rejection_reason(status: str, event_type: str) -> str:
    return f"{REASON_INVALID_TRANSITION}:{transition(status, event_type)}"
