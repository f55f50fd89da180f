"""One test per contract rule and per kind of bad input."""

from __future__ import annotations

import json
from decimal import Decimal

from pyspark.sql import functions as F

from lakehouse.core.events import FIELDS, REQUIRED_FIELDS, STRING_FIELDS
from lakehouse.transforms.parse import parse_events
from lakehouse.transforms.validate import (
    TEXT_FIELDS,
    ValidationRules,
    accepted_events,
    quarantined_records,
    reasons,
    validate_events,
)
from tests.unit.transforms.conftest import event


def plan_text(df) -> str:
    """The optimized plan with every column of its projections (by default those past 25
    are elided)."""
    key, conf = "spark.sql.debug.maxToStringFields", df.sparkSession.conf
    before = conf.get(key, None)
    conf.set(key, "1000")
    try:
        return str(df._jdf.queryExecution().optimizedPlan().toString())
    finally:
        conf.unset(key) if before is None else conf.set(key, before)


RULES = ValidationRules(max_record_bytes=2048, future_tolerance_seconds=300)


def reasons_of(bronze, *values):
    checked = bronze(*values).transform(parse_events).transform(validate_events, RULES)
    spelled = checked.orderBy("offset").select(reasons(F.col("reason_bits")).alias("reasons"))
    return [r["reasons"] for r in spelled.collect()]


def test_a_good_event_has_no_reason_and_typed_columns(bronze) -> None:
    sent = event(event_type="purchase", amount=12.5, page="/caf\u00e9 \u2615", user_id='u"1\\')
    checked = bronze(sent).transform(parse_events)
    [row] = accepted_events(checked.transform(validate_events, RULES)).collect()
    assert {f: row[f] for f in TEXT_FIELDS} == {
        "event_id": "e-1",
        "event_type": "purchase",
        "user_id": 'u"1\\',
        "session_id": "s1",
        "page": "/caf\u00e9 \u2615",
        "product_id": "p1",
    }
    assert row["amount"] == Decimal("12.50")
    assert row["event_time"].isoformat().startswith("2026-03-01T11:59:00")
    assert str(row["event_date"]) == "2026-03-01"
    assert (row["kafka_partition"], row["kafka_offset"]) == (0, 0)


# (record value, its reasons): one frame holds them all, as one batch would.
BROKEN = [
    ('{"event_id": "e-1", "event_type": ', ["malformed_json"]),
    ("not json at all", ["malformed_json"]),
    ("[1, 2, 3]", ["malformed_json"]),
    (event(page=...), ["missing_field:page"]),
    (event(event_id=...), ["missing_field:event_id"]),
    (event(user_id=""), ["missing_field:user_id"]),
    (event(event_time=None), ["missing_field:event_time"]),
    (event(event_time=1772366340), ["wrong_type:event_time"]),
    (event(event_time="2026-03-01"), ["wrong_type:event_time"]),
    (event(event_time="2026-03-01 11:59:00"), ["wrong_type:event_time"]),
    (event(sent_at="yesterday"), ["wrong_type:sent_at"]),
    (event(event_type="purchase", amount="abc"), ["wrong_type:amount"]),
    (event(event_type="purchase", amount=...), ["missing_field:amount"]),
    (event(event_type="purchase", amount=-3), ["invalid_value:amount"]),
    (event(event_type="refund"), ["invalid_value:event_type"]),
    (event(event_id="x" * 65), ["invalid_value:event_id"]),
    (event(event_time="2026-03-01T12:06:00Z"), ["event_time_in_future"]),
    (event(page=..., user_id=...), ["missing_field:user_id", "missing_field:page"]),
    ('"a JSON string"', ["malformed_json"]),
    ("{}", [f"missing_field:{f}" for f in REQUIRED_FIELDS]),
    (event(**dict.fromkeys(FIELDS)), [f"missing_field:{f}" for f in REQUIRED_FIELDS]),
    (
        event(page={"path": "/"}, event_type=["click"]),
        ["wrong_type:event_type", "wrong_type:page"],
    ),
    (event(user_id=True), ["wrong_type:user_id"]),
    (event(event_type="purchase", amount="9.99"), ["wrong_type:amount"]),
    (event(amount="9.99"), ["wrong_type:amount"]),
    (event(event_type="purchase", amount=True), ["wrong_type:amount"]),
    (event(event_type="purchase", amount=[1]), ["wrong_type:amount"]),
    (event(event_type="purchase", amount=1e30), ["wrong_type:amount"]),
    # One JSON object and nothing else (lakehouse.transforms.json_text).
    (json.dumps(event()) + " and more", ["malformed_json"]),
    (json.dumps(event()) * 2, ["malformed_json"]),
    (json.dumps(event()) + "]", ["malformed_json"]),
    (json.dumps(event()).replace('"', "'"), ["malformed_json"]),
    (json.dumps(event()).replace('"page": "/"', '"page": "a\tb"'), ["malformed_json"]),
    ('{"event_id": "e-1", "amount": NaN}', ["malformed_json"]),
    (b'{"event_id": "\xff"}', ["invalid_utf8"]),
    (b"\xc3\x28", ["invalid_utf8"]),
    # The future tolerance is measured from the Kafka timestamp: 4:59 after the broker's clock.
    (event(event_time="2026-03-01T12:04:59Z"), []),
    # Oversized records are refused even when otherwise valid; any other reason is kept.
    (event(padding="x" * 3000), ["oversized_record"]),
    ("x" * 3000, ["oversized_record", "malformed_json"]),
    (b"\xff" * 3000, ["oversized_record", "invalid_utf8"]),
    # Each string field given another JSON type.
    *(
        (event(**{f: v}), [f"wrong_type:{f}"])
        for f in STRING_FIELDS
        for v in (12345, 9.5, {"a": "b"}, ["x"], False)
    ),
]


def test_each_broken_rule_gives_its_reason(bronze) -> None:
    found = reasons_of(bronze, *(value for value, _ in BROKEN))
    wrong = [(v, want, got) for (v, want), got in zip(BROKEN, found, strict=True) if got != want]
    assert not wrong, "\n".join(f"{v!r}: expected {w}, got {g}" for v, w, g in wrong)


def test_a_purchase_amount_given_as_a_json_number_of_any_form_is_accepted(bronze) -> None:
    values = [12, 12.5, 1.25e1, 0]
    purchases = [
        event(event_id=f"e-{i}", event_type="purchase", amount=a) for i, a in enumerate(values)
    ]
    checked = bronze(*purchases).transform(parse_events).transform(validate_events, RULES)
    amounts = [r["amount"] for r in accepted_events(checked).orderBy("kafka_offset").collect()]
    assert amounts == [Decimal("12.00"), Decimal("12.50"), Decimal("12.50"), Decimal("0.00")]


def test_quarantine_keeps_the_raw_record_and_its_coordinates(bronze) -> None:
    checked = bronze(event(), "garbage").transform(parse_events).transform(validate_events, RULES)
    [row] = quarantined_records(checked).collect()
    assert (row["value"], row["kafka_offset"], row["reason"]) == (b"garbage", 1, "malformed_json")
    assert row["value_bytes"] == 7
    assert accepted_events(checked).count() == 1, "one bad record never blocks the others"


def test_a_value_that_is_not_utf8_is_quarantined_with_its_bytes(bronze) -> None:
    sent = json.dumps(event()).encode().replace(b'"/"', b'"/\xe9t\xe9"')  # Latin-1 "été"
    checked = bronze(sent).transform(parse_events).transform(validate_events, RULES)
    [row] = quarantined_records(checked).collect()
    assert (row["key"], row["value"], row["value_bytes"]) == (b"u1", sent, len(sent))
    assert row["reasons"] == ["invalid_utf8"]
    assert accepted_events(checked).count() == 0


def test_a_record_without_a_value_is_malformed(bronze) -> None:
    no_value = bronze(event()).withColumn("value", F.lit(None).cast("binary"))
    checked = no_value.transform(parse_events).transform(validate_events, RULES)
    [row] = quarantined_records(checked).collect()
    assert row["reasons"] == ["malformed_json"]


def test_each_timestamp_is_converted_once_however_the_rows_are_filtered(bronze) -> None:
    # Without the barrier in validate_events the optimizer pushed accepted_events' filter
    # below the conversions: event_time was parsed three times per record.
    accepted = (
        bronze(event()).transform(parse_events).transform(validate_events, RULES)
    ).transform(accepted_events)
    assert plan_text(accepted).count("RLIKE(") == 2, "event_time and sent_at, once each"
    # The batch layer's filter on event_time too.
    since = accepted.where(F.col("event_time") >= F.lit("2026-03-01").cast("timestamp"))
    assert plan_text(since).count("RLIKE(") == 2, "event_time and sent_at, once each"
