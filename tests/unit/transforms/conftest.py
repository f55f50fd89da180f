"""Tiny bronze rows built in code, for the transform tests."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pytest

from lakehouse.core.frames import rows_frame

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

KAFKA_TIME = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
RAW_SCHEMA = (
    "key binary, value binary, topic string, partition int, offset long, "
    "kafka_timestamp timestamp, ingested_at timestamp"
)


def event(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "event_id": "e-1",
        "event_type": "click",
        "user_id": "u1",
        "session_id": "s1",
        "page": "/",
        "product_id": "p1",
        "amount": None,
        "event_time": "2026-03-01T11:59:00Z",
        "sent_at": "2026-03-01T11:59:01Z",
    }
    base.update(overrides)
    return {k: v for k, v in base.items() if v is not ...}


def as_bytes(value: dict[str, Any] | str | bytes) -> bytes:
    if isinstance(value, bytes):
        return value
    return (value if isinstance(value, str) else json.dumps(value)).encode()


@pytest.fixture
def bronze(spark: SparkSession):
    """bronze(value_or_event, ...) -> a bronze DataFrame, one row per value (an event, its
    JSON text, or the bytes received), offsets 0.."""

    def build(*values: dict[str, Any] | str | bytes, partition: int = 0) -> DataFrame:
        rows = [
            (
                b"u1",
                as_bytes(v),
                "events",
                partition,
                offset,
                KAFKA_TIME,
                KAFKA_TIME,
            )
            for offset, v in enumerate(values)
        ]
        return rows_frame(spark, rows, RAW_SCHEMA)

    return build
