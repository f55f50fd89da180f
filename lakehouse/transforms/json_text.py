"""A record's text read as exactly one JSON object, as RFC 8259 writes JSON.

Spark's JSON reader is lenient where a contract must not be: it takes 'single quotes' and
NaN, and it stops at the end of the first value, so `{...} trailing text`, `{...}{...}` and
`{...}}` would pass as the first object. Here the reader's leniencies are turned off, and the
text is read as the first element of an array that a sentinel closes: `[<text>,null]`.
Anything after the object (text, a second value, a stray brace) breaks that array, or, if it
closes the array early with a `]` of its own, leaves the sentinel out of it. Only a text that
holds `]` can close it early, and no text closes it early in the same way before two different
sentinels, so that rare text is read a second time, before `{}`, to be sure.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

# What Spark's reader allows beyond JSON, turned off (comments, unquoted names, leading zeros
# and raw control characters in strings are refused by default).
STRICT = {"allowSingleQuotes": "false", "allowNonNumericNumbers": "false"}


def _before_sentinel(text: Column, schema: str, sentinel: str) -> Column:
    """`[<text>,<sentinel>]` read as an array of `schema` (null when it is no such array)."""
    wrapped = F.concat(F.lit("["), text, F.lit(f",{sentinel}]"))
    return F.from_json(wrapped, f"array<{schema}>", STRICT)


def with_one_json_object(df: DataFrame, text: Column, schema: str, name: str) -> DataFrame:
    """`df` with column `name`: `text` read as one JSON object of `schema` (a struct's DDL:
    the object's other keys are ignored, a key given twice counts once, its last value), or
    null when `text` is null or not exactly one JSON object.

    The text is read once per record, whatever reads `name` later: the read is exploded out of
    a one-element array, a barrier the optimizer does not push a filter through (it would
    copy the read into every field the filter reads, docs/performance.md)."""
    parsed, kept = f"_{name}_parsed", f"_{name}_text"
    with_text = df.withColumn(kept, text)  # computed once, read up to three times below
    text = F.col(kept)
    read = with_text.select(
        "*", F.explode(F.array(_before_sentinel(text, schema, "null"))).alias(parsed)
    )
    first = F.col(parsed)
    # The value, then the sentinel, and nothing else; a JSON null or any other non-object
    # value reads as a null element or no array at all.
    alone = F.coalesce((F.size(first) == 2) & first[1].isNull(), F.lit(False))
    # Read again before `{}`: the value and the sentinel, neither null. A text that closes the
    # array early reads the same both times, so it cannot end in null and in `{}` alike.
    again = F.array_compact(_before_sentinel(text, schema, "{}"))
    closed_by_sentinel = F.coalesce(F.size(again) == 2, F.lit(False))
    exact = alone & F.when(text.contains("]"), closed_by_sentinel).otherwise(F.lit(True))
    return read.withColumn(name, F.when(exact, first[0])).drop(parsed, kept)
