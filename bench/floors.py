"""Lower bounds that no pipeline reading JSON events can beat on this machine.

The goals compare a recompute or a replay with a plain read that never looks inside a record.
Parsing the JSON is work every recompute and replay must do; timing it alone (read, parse
every field, discard) shows how much of the gap to the goal is the parse itself."""

from __future__ import annotations

import time
from typing import Any

from lakehouse.transforms.parse import parse_events


def parse_only_seconds(raw: Any) -> float:
    """Seconds to read `raw` (bronze-shaped rows) and parse every record's fields, no more:
    Spark's no-op sink consumes every parsed column and writes nothing."""
    began = time.monotonic()
    raw.transform(parse_events).write.format("noop").mode("overwrite").save()
    return time.monotonic() - began
