"""Lower bounds that no pipeline reading JSON events can beat on this machine.

The goals compare a recompute or a replay with a plain read that never looks inside a record.
Parsing the JSON is work every recompute and replay must do; timing it alone (read, parse
every field, discard) shows how much of the gap to the goal is the parse itself. Validating
and deduplicating are too (invariant 1: every record lands once, or in quarantine, or counted
as a duplicate): timing read, parse, validate and dedup, with no view and no write, bounds
what any correct recompute or replay costs before it computes a view."""

from __future__ import annotations

import time
from typing import Any

from lakehouse.config import Settings
from lakehouse.transforms.dedup import DEDUP_COLUMNS, first_delivery_per_event
from lakehouse.transforms.parse import parse_events
from lakehouse.transforms.validate import ValidationRules, accepted_events, validate_events
from lakehouse.views import VIEW_INPUT_COLUMNS


def parse_only_seconds(raw: Any) -> float:
    """Seconds to read `raw` (bronze-shaped rows) and parse every record's fields, no more:
    Spark's no-op sink consumes every parsed column and writes nothing."""
    began = time.monotonic()
    raw.transform(parse_events).write.format("noop").mode("overwrite").save()
    return time.monotonic() - began


def deduplicated_seconds(raw: Any, settings: Settings) -> float:
    """Seconds to read `raw`, parse, validate and deduplicate it, keeping only the columns
    the views read (as the batch layer does), and discard the result: the shared first steps
    of the batch layer and a replay, without their cache, views and writes."""
    rules = ValidationRules(
        max_record_bytes=settings.speed.max_record_bytes,
        future_tolerance_seconds=settings.speed.future_tolerance_seconds,
    )
    began = time.monotonic()
    (
        raw.transform(parse_events)
        .transform(validate_events, rules)
        .transform(accepted_events)
        .select(*DEDUP_COLUMNS, *VIEW_INPUT_COLUMNS)
        .transform(first_delivery_per_event)
        .write.format("noop")
        .mode("overwrite")
        .save()
    )
    return time.monotonic() - began
