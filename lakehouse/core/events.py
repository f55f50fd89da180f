"""The event model: the JSON contract producers follow, and the reasons a record is refused.

One event is one JSON object, UTF-8, sent to the `events` topic with key = user_id (so one
user's events stay in order in one partition):

    field       JSON type          rule
    event_id    string             required, unique per event, at most 64 characters
    event_type  string             required, one of EVENT_TYPES
    user_id     string             required
    session_id  string             optional (the producer's own notion; Tributary sessionizes)
    page        string             required (the views group by it)
    product_id  string             optional
    amount      number             required and >= 0 for purchases; kept for purchases only,
                                   to the cent (rounded half up); a number of more than 16
                                   digits before the point is wrong_type:amount
    event_time  string             required, ISO-8601 with a zone: 2026-01-01T12:00:00.250Z
    sent_at     string             optional, ISO-8601 with a zone

The JSON types are part of the contract: a value of another type (a number, boolean, object
or array where a string belongs; anything but a number for amount) is `wrong_type:<field>`,
never read as text. A JSON null counts as an absent field. A field given twice: the last
value counts (a later null makes it absent).

A value that is not UTF-8 is `invalid_utf8`, and a UTF-8 value that is not exactly one JSON
object as RFC 8259 writes it (anything after the object, single quotes, NaN or Infinity,
comments, a raw control character in a string) `malformed_json`: either is the record's one
content reason (there are no fields to judge); `oversized_record` may come with it. A record
that breaks a rule goes to bronze.quarantine with one reason per broken rule (the REASON_*
values below), its key and value kept as the bytes received; it never stops the pipeline.

event_id identifies the event: the first delivery of an id in the log is the event, every
later one a duplicate, dropped. A later delivery that says something else (other fields but
sent_at) is quarantined as a conflicting duplicate, naming the first delivery's position.
"""

from __future__ import annotations

EVENT_TYPES = ("page_view", "click", "add_to_cart", "purchase")
REQUIRED_FIELDS = ("event_id", "event_type", "user_id", "page", "event_time")
FIELDS = (
    "event_id",
    "event_type",
    "user_id",
    "session_id",
    "page",
    "product_id",
    "amount",
    "event_time",
    "sent_at",
)
# Fields whose JSON type is string; amount is the one number.
STRING_FIELDS = tuple(f for f in FIELDS if f != "amount")
MAX_EVENT_ID_LENGTH = 64
# ISO-8601 with a 'T' and an explicit zone; Spark's cast alone would also take "2026-01-01".
ISO_TIMESTAMP_PATTERN = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$"

# Quarantine reasons. Parameterised ones are "<reason>:<field>".
REASON_OVERSIZED = "oversized_record"
REASON_MALFORMED = "malformed_json"
REASON_INVALID_UTF8 = "invalid_utf8"
REASON_MISSING = "missing_field"  # missing_field:<field>
REASON_WRONG_TYPE = "wrong_type"  # wrong_type:<field>
REASON_BAD_EVENT_TYPE = "invalid_value:event_type"
REASON_EVENT_ID_TOO_LONG = "invalid_value:event_id"
REASON_PURCHASE_WITHOUT_AMOUNT = "missing_field:amount"
REASON_NEGATIVE_AMOUNT = "invalid_value:amount"
REASON_FUTURE = "event_time_in_future"
# Not a broken rule but a later delivery of an event_id whose content differs from the
# first delivery's (lakehouse.transforms.dedup): the first stays in silver.
REASON_CONFLICTING_DUPLICATE = "conflicting_duplicate"
