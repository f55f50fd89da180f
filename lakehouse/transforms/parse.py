"""Kafka values -> event fields as the JSON values they are. Validation judges them."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from lakehouse.core.events import FIELDS

# Each field as a VARIANT: a JSON value that keeps its type (string, number, boolean, object,
# array or null), so validation can tell `"user_id": "u1"` from `"user_id": 12345`.
EVENT_JSON = "struct<" + ", ".join(f"`{f}`: variant" for f in FIELDS) + ">"


def decoded_value() -> str:
    """The value as UTF-8 text, or null when its bytes are not UTF-8 (or there is none)."""
    return "try_validate_utf8(value)"


def parse_events(raw: DataFrame) -> DataFrame:
    """Add `event` (a struct of the contract's fields, each a VARIANT, SQL null when absent)
    to bronze rows; `event` is null when the value is not UTF-8 or not a JSON object
    (malformed, truncated, a bare array or string, or no value). Other keys are ignored.

    The JSON is read once per record, whatever reads `event` later: the parse is exploded out
    of a one-element array, a barrier the optimizer does not push a filter through (it would
    copy the parse into every field the filter reads, docs/performance.md).
    """
    text = F.expr(decoded_value())
    parsed = raw.select("*", F.explode(F.array(F.from_json(text, EVENT_JSON))).alias("_json"))
    # from_json gives a struct of nulls both for a value that is no JSON object and for an
    # object with none of the fields; only those (rare) rows are parsed again to tell them
    # apart.
    none_found = F.coalesce(*(F.col(f"_json.{f}") for f in FIELDS)).isNull()
    not_an_object = none_found & F.json_object_keys(text).isNull()
    event = F.when(~not_an_object, F.col("_json"))
    return parsed.select(*raw.columns, event.alias("event"))
