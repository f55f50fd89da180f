"""Parsing: one `event` per bronze record, parsed once however it is filtered later."""

from __future__ import annotations

import json

from pyspark.sql import functions as F

from lakehouse.transforms.parse import parse_events
from lakehouse.transforms.validate import (
    ValidationRules,
    accepted_events,
    quarantined_records,
    validate_events,
)
from tests.unit.transforms.conftest import event

RULES = ValidationRules(max_record_bytes=2048, future_tolerance_seconds=300)


def test_every_record_keeps_its_row_even_without_a_value(bronze) -> None:
    no_value = bronze(event()).withColumn("value", F.lit(None).cast("binary"))
    raw = bronze(event(), "not json", b'{"page": "\xff"}').unionByName(no_value)
    parsed = raw.transform(parse_events)
    rows = parsed.orderBy(F.col("value").isNull(), "offset").collect()
    assert len(rows) == 4
    assert rows[0]["event"]["event_id"].toPython() == "e-1"
    assert rows[1]["value"] == b"not json" and rows[1]["event"] is None
    assert rows[2]["value"] == b'{"page": "\xff"}' and rows[2]["event"] is None, "not UTF-8"
    assert rows[3]["value"] is None and rows[3]["event"] is None


def test_each_field_keeps_its_json_type(bronze) -> None:
    [row] = bronze(event(user_id=12345, amount="9.99")).transform(parse_events).collect()
    assert row["event"]["user_id"].toPython() == 12345
    assert row["event"]["amount"].toPython() == "9.99"
    assert row["event"]["session_id"].toPython() == "s1"


def test_a_filter_on_parsed_fields_does_not_parse_again(bronze) -> None:
    # The optimizer used to push accepted_events' filter below the parse, copying the parse
    # into each field it reads (ten parses per record on a whole table).
    accepted = (
        bronze(event())
        .transform(parse_events)
        .transform(validate_events, RULES)
        .transform(accepted_events)
    )
    plan = accepted._jdf.queryExecution().optimizedPlan().toString()
    # One read; and the second, only for a text holding `]` (lakehouse.transforms.json_text).
    assert plan.count(",null]") == 1 and plan.count(",{}]") == 1, plan
    assert plan.count("from_json(") == 2, plan
    assert accepted.count() == 1


def test_a_field_given_twice_counts_its_last_value(bronze) -> None:
    # JSON leaves repeated names undefined; the parse reads the last value, a null too. Stream,
    # batch and replay share this parse, so they agree. Pinned so a parser change shows.
    plain = json.dumps(event(event_type="click"))
    twice = plain[:-1] + ', "event_type": "page_view"}'
    [row] = (
        bronze(twice)
        .transform(parse_events)
        .transform(validate_events, RULES)
        .transform(accepted_events)
        .collect()
    )
    assert row["event_type"] == "page_view"
    null_later = plain[:-1] + ', "user_id": null}'
    checked = bronze(null_later).transform(parse_events).transform(validate_events, RULES)
    assert [r["reasons"] for r in quarantined_records(checked).collect()] == [
        ["missing_field:user_id"]
    ]
