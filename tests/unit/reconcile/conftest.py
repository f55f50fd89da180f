"""Tiny events and view rows built in code, for the reconciliation tests."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import pytest

from lakehouse.core.frames import rows_frame
from lakehouse.transforms.views import VIEWS

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

EVENT_SCHEMA = (
    "event_id string, event_type string, user_id string, page string, "
    "amount decimal(18,2), event_time timestamp, kafka_timestamp timestamp"
)


def at(clock: str) -> datetime:
    """'10:03' or '10:03:30' on the test day, UTC."""
    return datetime.fromisoformat(f"2026-03-01T{clock}").replace(tzinfo=UTC)


class Events:
    """Accepted events (the columns the views and explanations read), made up in a line."""

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark
        self.made = 0

    def __call__(self, *rows: tuple[Any, ...]) -> DataFrame:
        """rows: (clock, event_type, user_id[, page[, amount[, kafka clock]]])."""
        full = []
        for row in rows:
            clock, kind, user, *rest = row
            page = rest[0] if rest else "/"
            amount = Decimal(rest[1]) if len(rest) > 1 and rest[1] is not None else None
            arrived = at(rest[2]) if len(rest) > 2 else at(clock)
            self.made += 1
            full.append((f"e{self.made}", kind, user, page, amount, at(clock), arrived))
        return rows_frame(self.spark, full, EVENT_SCHEMA)

    def view(self, name: str, *rows: tuple[Any, ...]) -> DataFrame:
        """The view's rows computed from these events."""
        return VIEWS[name].compute(self(*rows))


@pytest.fixture
def events(spark: SparkSession) -> Events:
    return Events(spark)


def by_status(result: DataFrame, *key_columns: str) -> dict[tuple[Any, ...], dict[str, Any]]:
    return {tuple(r[k] for k in key_columns): r.asDict() for r in result.collect()}
