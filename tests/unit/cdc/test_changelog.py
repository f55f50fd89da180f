"""The changelog stream's micro-batches on a local lakehouse: what each table holds after a
sequence of batches equals the changes applied all at once, whatever was delivered twice, out
of order or retried, and every record is either a change or quarantined; the batch recompute
of those tables (lakehouse.cdc.reconcile) finds them equal, finds a row the stream got wrong,
and leaves out a key whose change is still in flight."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from lakehouse.cdc.changelog import (
    PROGRESS,
    QUARANTINE,
    ChangelogProcessor,
    changes_table,
    current_table,
    history_table,
)
from lakehouse.cdc.reconcile import reconcile_changelog
from lakehouse.cdc.shop import USERS
from lakehouse.core.config import Settings
from lakehouse.core.delta_io import append_once, read_table, table_version
from lakehouse.core.frames import rows_frame
from lakehouse.transforms.bronze import to_raw_records
from lakehouse.transforms.changes import (
    accepted_changes,
    current_rows,
    history_rows,
    parse_changes,
    typed_rows,
)
from tests.lakehouses import copied, local_lakehouse, moved_to
from tests.micro_batches import query_checkpoint

pytestmark = pytest.mark.slow  # make test-fast leaves it out (docs/testing.md)

T0 = datetime(2026, 11, 25, 10, 0, tzinfo=UTC)
KAFKA = (
    "key binary, value binary, topic string, partition int, offset long, "
    "timestamp timestamp, timestampType int"
)


def iso(minute: float) -> str:
    return (T0 + timedelta(minutes=minute)).isoformat().replace("+00:00", "Z")


def change(op: str, lsn: int, before: dict | None, after: dict | None) -> dict:
    source = {"lsn": lsn, "txId": lsn // 10, "ts_ms": 1764064800000 + lsn, "snapshot": "false"}
    return {"before": before, "after": after, "op": op, "source": source}


def user(user_id: str, segment: str, minute: float) -> dict:
    return {"user_id": user_id, "segment": segment, "country": "DE", "updated_at": iso(minute)}


def records(spark, topic: str, first_offset: int, values: list[tuple[str, dict | bytes | None]]):
    """(user_id, envelope | raw bytes | None for a tombstone) as one partition's records."""

    def encoded(value: dict | bytes | None) -> bytes | None:
        return value if value is None or isinstance(value, bytes) else json.dumps(value).encode()

    rows = [
        (json.dumps({"user_id": key}).encode(), encoded(value), topic, 0, first_offset + i, T0, 0)
        for i, (key, value) in enumerate(values)
    ]
    return rows_frame(spark, rows, KAFKA)


@dataclass(frozen=True)
class Streamed:
    """Two batches of users' changes by one stream, then the second again by a restarted one."""

    folder: Path  # nothing writes to it after the fixture: copy it
    settings: Settings
    versions_before_retry: dict[str, int | None]
    versions_after_retry: dict[str, int | None]


TABLES = (current_table(USERS), history_table(USERS), changes_table(USERS), QUARANTINE)


def versions(spark, settings: Settings) -> dict[str, int | None]:
    return {t.name: table_version(spark, t, settings) for t in TABLES}


@pytest.fixture(scope="module")
def streamed(spark, tmp_path_factory) -> Streamed:
    folder = tmp_path_factory.mktemp("changelog")
    settings = local_lakehouse(folder)
    topic = settings.cdc.topic("users")
    u1a, u1b, u1c = user("u1", "new", 0), user("u1", "regular", 5), user("u1", "vip", 9)
    u2 = user("u2", "new", 1)
    first = records(
        spark,
        topic,
        0,
        [
            ("u1", change("r", 10, None, u1a)),
            ("u2", change("c", 20, None, u2)),
            ("u1", change("u", 40, u1a, u1b)),
            ("u2", b"{not json"),  # quarantined, and the stream goes on
            ("u2", change("c", 20, None, u2)),  # delivered twice in one batch: applied once
        ],
    )
    second = records(
        spark,
        topic,
        5,
        [
            ("u1", change("u", 60, u1b, u1c)),
            ("u1", change("u", 40, u1a, u1b)),  # redelivered after a connector restart
            ("u2", change("d", 50, u2, None)),  # committed before u1's last update
            ("u2", None),  # its tombstone
        ],
    )
    checkpoint = str(query_checkpoint(folder / "query", "changelog-1"))
    stream = ChangelogProcessor(settings, checkpoint)
    stream(first, 0)
    stream(second, 1)
    before = versions(spark, settings)
    # After a restart Spark may hand the last batch over again.
    ChangelogProcessor(settings, checkpoint)(second, 1)
    return Streamed(folder, settings, before, versions(spark, settings))


def test_batches_retried_and_redelivered_leave_the_tables_of_all_changes_at_once(
    spark, streamed: Streamed
) -> None:
    local_settings = streamed.settings
    topic = local_settings.cdc.topic("users")
    assert streamed.versions_after_retry == streamed.versions_before_retry, "nothing written"
    bronze = read_table(spark, changes_table(USERS), local_settings)
    assert bronze.count() == 8, "every change and the tombstone, as received"
    quarantine = read_table(spark, QUARANTINE, local_settings)
    assert [r["kafka_offset"] for r in quarantine.collect()] == [3]
    rows = typed_rows(bronze, USERS)
    assertDataFrameEqual(
        read_table(spark, current_table(USERS), local_settings), current_rows(rows, USERS)
    )
    assertDataFrameEqual(
        read_table(spark, history_table(USERS), local_settings), history_rows(rows, USERS)
    )
    current = read_table(spark, current_table(USERS), local_settings).collect()
    assert [(r["user_id"], r["segment"]) for r in current] == [("u1", "vip")]
    history = read_table(spark, history_table(USERS), local_settings)
    ended = history.where(F.col("deleted")).select("user_id").collect()
    assert [r["user_id"] for r in ended] == ["u2"]

    progress = read_table(spark, PROGRESS, local_settings).orderBy("batch_id").collect()
    assert [(r["batch_id"], r["records"], r["quarantined"]) for r in progress] == [
        (0, 5, 1),
        (1, 4, 0),
    ]
    assert [r["applied"]["users"] for r in progress] == [3, 2], "the redelivery not applied"
    assert progress[-1]["offsets"] == {f"{topic}:0": 9}


def test_the_batch_recompute_finds_the_stream_s_tables_equal(spark, streamed: Streamed) -> None:
    reconciled = reconcile_changelog(spark, streamed.settings)
    [users, *others] = reconciled.tables
    assert reconciled.batch_id == 1 and reconciled.equal
    assert (users.table, users.in_flight_keys) == ("users", 0)
    # u1's current row (u2 is deleted: no current row on either side); u1's three versions
    # and u2's one.
    assert (users.current.compared, users.current.equal) == (1, 1)
    assert (users.history.compared, users.history.equal) == (4, 4)
    assert users.current.examples == users.history.examples == []
    assert all(o.equal and o.current.compared == 0 for o in others), "no changes, nothing to differ"


def test_a_row_the_stream_got_wrong_is_a_difference_and_a_change_in_flight_is_left_out(
    spark, streamed: Streamed, tmp_path: Path
) -> None:
    settings = moved_to(streamed.settings, copied(streamed.folder, tmp_path / "copy"))
    current = current_table(USERS).path(settings)
    from delta.tables import DeltaTable

    DeltaTable.forPath(spark, current).update("user_id = 'u1'", {"segment": F.lit("lost")})
    # A batch the stream has begun: its change of u3 is in bronze, not yet merged.
    u3 = user("u3", "new", 2)
    begun = records(spark, settings.cdc.topic("users"), 9, [("u3", change("c", 70, None, u3))])
    rows = accepted_changes(begun.transform(to_raw_records).transform(parse_changes))
    append_once(rows, changes_table(USERS), settings, "begun", 2)

    [users, *_] = reconcile_changelog(spark, settings).tables

    assert users.in_flight_keys == 1
    assert (users.current.compared, users.current.differing) == (1, 1)
    assert (users.history.compared, users.history.differing) == (4, 0)
    assert users.current.examples == [
        "user_id=u1: segment vip in the recompute, lost in the stream"
    ]
