"""Bronze keeps each Kafka record as received: key and value as the bytes sent."""

from __future__ import annotations

from datetime import UTC, datetime

from pyspark.sql.types import BinaryType

from lakehouse.core.frames import rows_frame
from lakehouse.core.tables import table
from lakehouse.transforms.bronze import RAW_COLUMNS, to_raw_records

KAFKA = (
    "key binary, value binary, topic string, partition int, offset long, timestamp timestamp, "
    "timestampType int"
)
AT = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def test_key_and_value_stay_the_bytes_received(spark) -> None:
    sent = [(b"u1", b'{"page": "/"}'), (b"\xff\xfe", b"\xc3\x28 not UTF-8"), (None, None)]
    kafka = rows_frame(
        spark, [(k, v, "events", 0, i, AT, 0) for i, (k, v) in enumerate(sent)], KAFKA
    )
    raw = kafka.transform(to_raw_records)
    assert tuple(raw.columns) == RAW_COLUMNS
    assert isinstance(raw.schema["key"].dataType, BinaryType)
    assert isinstance(raw.schema["value"].dataType, BinaryType)
    kept = [(r["key"], r["value"]) for r in raw.orderBy("offset").collect()]
    assert [(k and bytes(k), v and bytes(v)) for k, v in kept] == sent


def test_the_registry_declares_bronze_key_and_value_as_bytes() -> None:
    for name in ("bronze.events_raw", "bronze.quarantine"):
        schema = table(name).spark_schema()
        assert isinstance(schema["key"].dataType, BinaryType), name
        assert isinstance(schema["value"].dataType, BinaryType), name
