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
    amount      number             required and >= 0 for purchases; ignored otherwise
    event_time  string             required, ISO-8601 with a zone: 2026-01-01T12:00:00.250Z
    sent_at     string             optional, ISO-8601 with a zone

A record that breaks a rule goes to bronze.quarantine with one reason per broken rule
(the REASON_* values below); it never stops the pipeline.

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
MAX_EVENT_ID_LENGTH = 64
# ISO-8601 with a 'T' and an explicit zone; Spark's cast alone would also take "2026-01-01".
ISO_TIMESTAMP_PATTERN = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$"

# Quarantine reasons. Parameterised ones are "<reason>:<field>".
REASON_OVERSIZED = "oversized_record"
REASON_MALFORMED = "malformed_json"
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
