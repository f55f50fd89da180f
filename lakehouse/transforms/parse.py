"""Kafka values -> event fields as the JSON values they are. Validation judges them."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from lakehouse.core.events import FIELDS
from lakehouse.transforms.json_text import with_one_json_object

# Each field as a VARIANT: a JSON value that keeps its type (string, number, boolean, object,
# array or null), so validation can tell `"user_id": "u1"` from `"user_id": 12345`.
EVENT_JSON = "struct<" + ", ".join(f"`{f}`: variant" for f in FIELDS) + ">"


def decoded_value() -> str:
    """The value as UTF-8 text, or null when its bytes are not UTF-8 (or there is none)."""
    return "try_validate_utf8(value)"


def parse_events(raw: DataFrame) -> DataFrame:
    """Add `event` (a struct of the contract's fields, each a VARIANT, SQL null when absent)
    to bronze rows; `event` is null when the value is not UTF-8 or not exactly one JSON object
    (malformed, truncated, followed by more text, a bare array or string, or no value). Other
    keys are ignored. The JSON is read once per record (lakehouse.transforms.json_text)."""
    return with_one_json_object(raw, F.expr(decoded_value()), EVENT_JSON, "event")
