"""A record's text read as exactly one JSON object: what RFC 8259 calls JSON and nothing more."""

from __future__ import annotations

import json

import pytest
from pyspark.sql import functions as F

from lakehouse.transforms.json_text import with_one_json_object

SCHEMA = "struct<a: variant, b: variant>"
OBJECT = json.dumps({"a": "x", "b": 1})

# Texts that are one JSON object, and the `a` each reads.
ONE_OBJECT = [
    (OBJECT, "x"),
    (f" \t\r\n{OBJECT} \n", "x"),
    ('{"a": "]", "b": "}{"}', "]"),  # brackets and braces inside strings
    ('{"a": [1, [2, {"c": "]"}]], "b": null}', [1, [2, {"c": "]"}]]),
    ('{"a": {"x": []}}', {"x": []}),
    ('{"b": 1}', None),  # an object without the field
    ('{"a": "first", "a": "last"}', "last"),  # a key given twice: its last value
    ('{"a": "\\u00e9\\n"}', "\u00e9\n"),
]

# Texts that are not exactly one JSON object, however Spark's reader would take them.
NOT_ONE_OBJECT = [
    f"{OBJECT} trailing",
    OBJECT * 2,
    f"{OBJECT}}}",
    f"{OBJECT}]",
    f"{OBJECT}] more",
    f"{OBJECT},null] more",  # the sentinels of the read, spelled out by the text
    f"{OBJECT},{{}}] more",
    f"{OBJECT},{OBJECT}",
    f"[{OBJECT}]",
    "{'a': 'x'}",
    '{"a": NaN}',
    '{"a": Infinity}',
    '{"a": "x\ty"}',  # a raw control character in a string
    '{"a": 01}',
    '{a: "x"}',
    '{"a": "x" /* comment */}',
    '{"a": "x",}',
    '{"a": "x"',
    '"a string"',
    "12",
    "null",
    "[]",
    "",
    "   ",
]


def read(spark, texts: list[str | None]):
    df = spark.createDataFrame([(i, t) for i, t in enumerate(texts)], "i int, text string")
    read = with_one_json_object(df, F.col("text"), SCHEMA, "obj")
    return [r["obj"] for r in read.orderBy("i").collect()]


def test_one_json_object_is_read_with_its_fields(spark) -> None:
    found = read(spark, [t for t, _ in ONE_OBJECT])
    assert all(obj is not None for obj in found), found
    values = [None if obj["a"] is None else obj["a"].toPython() for obj in found]
    assert values == [a for _, a in ONE_OBJECT]


@pytest.mark.parametrize("texts", [NOT_ONE_OBJECT])
def test_anything_else_reads_as_null(spark, texts: list[str]) -> None:
    found = read(spark, [*texts, None])
    read_anyway = [t for t, obj in zip([*texts, None], found, strict=True) if obj is not None]
    assert not read_anyway, read_anyway


def test_the_columns_are_kept_and_nothing_else_is_added(spark) -> None:
    df = spark.createDataFrame([(1, OBJECT)], "i int, text string")
    assert with_one_json_object(df, F.col("text"), SCHEMA, "obj").columns == ["i", "text", "obj"]
