"""Parsing: one `event` per bronze record, parsed once however it is filtered later."""

from __future__ import annotations

import json

from pyspark.sql import functions as F

from lakehouse.transforms.parse import parse_events
from lakehouse.transforms.validate import ValidationRules, accepted_events, validate_events
from tests.unit.transforms.conftest import event

RULES = ValidationRules(max_record_bytes=2048, future_tolerance_seconds=300)


def test_every_record_keeps_its_row_even_without_a_value(bronze) -> None:
    no_value = bronze(event()).withColumn("value", F.lit(None).cast("string"))
    raw = bronze(event(), "not json").unionByName(no_value)
    parsed = raw.transform(parse_events)
    rows = parsed.orderBy(F.col("value").isNull(), "offset").collect()
    assert len(rows) == 3
    assert rows[0]["event"]["event_id"] == "e-1"
    assert rows[1]["value"] == "not json" and rows[1]["event"] is None
    assert rows[2]["value"] is None and rows[2]["event"] is None


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
    assert plan.count("json_tuple(") == 1
    assert accepted.count() == 1


def test_a_field_given_twice_counts_its_last_non_null_value(bronze) -> None:
    # JSON leaves repeated names undefined; json_tuple reads the last non-null one. Stream,
    # batch and replay share this parse, so they agree; the record is not quarantined for it
    # (telling would take a second parse of every record). Pinned so a parser change shows.
    plain = json.dumps(event(event_type="click"))
    twice = plain[:-1] + ', "event_type": "page_view", "user_id": null}'
    [row] = (
        bronze(twice)
        .transform(parse_events)
        .transform(validate_events, RULES)
        .transform(accepted_events)
        .collect()
    )
    assert (row["event_type"], row["user_id"]) == ("page_view", "u1")
