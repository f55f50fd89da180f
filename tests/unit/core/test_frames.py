"""Rows built in Python become the DataFrame createDataFrame would make, through Arrow."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone
from decimal import Decimal

import pytest
from pyspark.sql import Row

from lakehouse.core.frames import checkpoint_measured, rows_frame

EVERY_KIND = (
    "id string, at timestamp, day date, amount decimal(18,2), tags array<string>, "
    "steps map<string,double>, n long, share double, ok boolean, bin binary, "
    "part struct<a:int,b:string>"
)


@pytest.mark.parametrize(
    ("schema", "rows"),
    [
        (
            EVERY_KIND,
            [
                # A naive datetime is local time, an aware one is converted.
                (
                    "e1",
                    datetime(2026, 3, 1, 12),
                    date(2026, 3, 1),
                    Decimal("1.50"),
                    ["a", None],
                    {"x": 1.5},
                    3,
                    2.5,
                    True,
                    b"\x00k",
                    (1, "q"),
                ),
                (
                    "e2",
                    datetime(2026, 3, 1, 12, tzinfo=timezone(timedelta(hours=2))),
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                ),
                Row(
                    id="e3",
                    at=datetime(2026, 3, 1, tzinfo=UTC),
                    day=None,
                    amount=Decimal("-3"),
                    tags=[],
                    steps={},
                    n=-1,
                    share=0.0,
                    ok=False,
                    bin=b"",
                    part=Row(a=2, b="z"),
                ),
            ],
        ),
        ("string", ['{"a": 1}', None]),
        ("id long, note string", [{"id": 1, "note": "x"}, {"id": 2}]),
        ("id long", []),
    ],
    ids=["every-kind", "one-value-column", "dicts", "no-rows"],
)
@pytest.mark.parametrize("ignore_timezone", ["", "1"], ids=["", "pyarrow-ignoring-offsets"])
def test_the_same_frame_as_create_data_frame(
    spark, schema, rows, ignore_timezone, monkeypatch
) -> None:
    # Importing pyspark.pandas (Great Expectations does) sets PYARROW_IGNORE_TIMEZONE=1 for
    # the whole process, and pyarrow then reads an aware datetime's wall clock as UTC.
    monkeypatch.setenv("PYARROW_IGNORE_TIMEZONE", ignore_timezone)
    made = rows_frame(spark, rows, schema)
    expected = spark.createDataFrame(rows, schema)
    assert made.schema == expected.schema
    assert made.collect() == expected.collect()


def test_a_row_of_the_wrong_length_is_refused(spark) -> None:
    with pytest.raises(ValueError, match="a row of 1 values for 2 columns"):
        rows_frame(spark, [(1,)], "id long, note string")


@pytest.mark.parametrize("rows", [[(1, "a"), (2, None), (3, "ccc")], []], ids=["rows", "no-rows"])
def test_a_measured_checkpoint_counts_its_rows_and_their_json_bytes_in_its_own_job(
    spark, rows
) -> None:
    frame = rows_frame(spark, rows, "id long, note string")
    context = spark.sparkContext
    group = f"measured-{len(rows)}"
    context.setJobGroup(group, "checkpoint_measured")
    try:
        held, count, size = checkpoint_measured(frame.where("id > 1"))
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)
    # At most the checkpoint's own job (none without rows): the measures were observed in it.
    assert len(context.statusTracker().getJobIdsForGroup(group)) <= 1
    expected = frame.where("id > 1").toJSON().collect()
    assert count == len(expected)
    assert size == sum(len(line.encode()) for line in expected)
    assert sorted(held.collect()) == sorted(frame.where("id > 1").collect())
