"""A tiny lakehouse of captured users built in code, for the CDC reconciliation's tests: the
changes in bronze.users_changes, the stream's silver.users_current and silver.users_history
as the stream would have left them after one completed batch, and that batch's progress row.
A test then spoils one of the stream's tables to see the difference found."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lakehouse.cdc.changelog import PROGRESS, changes_table, current_table, history_table
from lakehouse.cdc.shop import USERS
from lakehouse.core.config import Settings
from lakehouse.core.delta_io import append_once, small_frame
from lakehouse.core.frames import rows_frame
from lakehouse.transforms.bronze import to_raw_records
from lakehouse.transforms.changes import (
    accepted_changes,
    current_rows,
    history_rows,
    parse_changes,
    typed_rows,
)
from tests.lakehouses import local_lakehouse

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

T0 = datetime(2026, 11, 25, 10, 0, tzinfo=UTC)
KAFKA = (
    "key binary, value binary, topic string, partition int, offset long, "
    "timestamp timestamp, timestampType int"
)
BATCH_ID = 7


def user(user_id: str, segment: str, minute: int) -> dict[str, Any]:
    when = (T0 + timedelta(minutes=minute)).isoformat().replace("+00:00", "Z")
    return {"user_id": user_id, "segment": segment, "country": "DE", "updated_at": when}


def change(op: str, lsn: int, before: dict | None, after: dict | None) -> dict[str, Any]:
    source = {"lsn": lsn, "txId": lsn, "ts_ms": 1764064800000 + lsn, "snapshot": "false"}
    return {"before": before, "after": after, "op": op, "source": source}


# u1 created then updated (two versions), u2 created: three changes, offsets 0-2.
CHANGES = [
    ("u1", change("c", 10, None, user("u1", "new", 0))),
    ("u2", change("c", 20, None, user("u2", "new", 1))),
    ("u1", change("u", 30, user("u1", "new", 0), user("u1", "vip", 5))),
]


def bronze_changes(
    spark: SparkSession, settings: Settings, changes: list[tuple[str, dict]], first_offset: int
) -> DataFrame:
    """(user_id, envelope) as bronze.users_changes rows, from `first_offset` in partition 0."""
    topic = settings.cdc.topic("users")
    records = rows_frame(
        spark,
        [
            (json.dumps({"user_id": k}).encode(), json.dumps(v).encode(), topic, 0, i, T0, 0)
            for i, (k, v) in enumerate(changes, start=first_offset)
        ],
        KAFKA,
    )
    return accepted_changes(records.transform(to_raw_records).transform(parse_changes))


def build_users(spark: SparkSession, folder: Path) -> Settings:
    """The lakehouse in `folder`: the stream's tables equal to their recompute."""
    settings = local_lakehouse(folder)
    topic = settings.cdc.topic("users")
    bronze = bronze_changes(spark, settings, CHANGES, 0)
    append_once(bronze, changes_table(USERS), settings, "test", 0)
    rows = typed_rows(bronze, USERS)
    append_once(current_rows(rows, USERS), current_table(USERS), settings, "test", 0)
    append_once(history_rows(rows, USERS), history_table(USERS), settings, "test", 0)
    progress = {
        "app_id": "cdc:test",
        "batch_id": BATCH_ID,
        "records": len(CHANGES),
        "quarantined": 0,
        "tombstones": 0,
        "applied": {"users": len(CHANGES)},
        "offsets": {f"{topic}:0": len(CHANGES)},
        "newest_commit_time": T0,
        "processed_at": T0 + timedelta(minutes=6),
        "duration_seconds": 1.0,
    }
    append_once(small_frame(spark, [progress], PROGRESS), PROGRESS, settings, "test", 0)
    return settings


def spoil_segment(spark: SparkSession, settings: Settings, user_id: str, segment: str) -> None:
    """The stream's current row of `user_id` holds another segment than its changes say."""
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    path = current_table(USERS).path(settings)
    DeltaTable.forPath(spark, path).update(f"user_id = '{user_id}'", {"segment": F.lit(segment)})


def drop_version(spark: SparkSession, settings: Settings, user_id: str, lsn: int) -> None:
    """The stream's history lacks the version of `user_id` the change at `lsn` opened."""
    from delta.tables import DeltaTable

    path = history_table(USERS).path(settings)
    DeltaTable.forPath(spark, path).delete(f"user_id = '{user_id}' AND lsn = {lsn}")


def begin_batch(spark: SparkSession, settings: Settings, user_id: str, segment: str) -> None:
    """A batch the stream has begun: its update of `user_id` in bronze, beyond the offsets of
    the completed batch, not yet merged into the stream's tables."""
    after = user(user_id, segment, 9)
    update = [(user_id, change("u", 90, user(user_id, "new", 1), after))]
    bronze = bronze_changes(spark, settings, update, len(CHANGES))
    append_once(bronze, changes_table(USERS), settings, "test", 1)
