"""The commerce stream's micro-batches on a local lakehouse: three batches of order events and
payments, with duplicates across batches, invalid transitions and broken records, the second
batch crashing before its state MERGE and retried by a restarted stream, and the last retried
once more after it committed. Every
record is accounted for once, every id is in silver once (its first delivery), the state is
the batch fold of bronze, and a retry writes nothing a first try wrote."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from lakehouse.commerce.outputs import CommerceOutputs
from lakehouse.commerce.processor import BatchWrite, CommerceProcessor
from lakehouse.commerce.rebuild import fold_bronze, state_differences
from lakehouse.core.config import Settings
from lakehouse.core.delta_io import read_table, table_version
from lakehouse.core.frames import rows_frame
from tests.lakehouses import local_lakehouse
from tests.micro_batches import query_checkpoint

pytestmark = pytest.mark.slow  # make test-fast leaves it out (docs/testing.md)

T0 = datetime(2026, 11, 25, 10, 0, tzinfo=UTC)
KAFKA = (
    "key binary, value binary, topic string, partition int, offset long, "
    "timestamp timestamp, timestampType int"
)
LIVE = CommerceOutputs.live()
KAFKA_TIME = T0 + timedelta(hours=1)  # every event_time before it: none in the future


def iso(minute: float) -> str:
    return (T0 + timedelta(minutes=minute)).isoformat().replace("+00:00", "Z")


def event(event_id: str, order: str, kind: str, minute: float, **more) -> dict:
    amount = {"amount": 20.0} if kind == "placed" else {}
    return {
        "event_id": event_id,
        "order_id": order,
        "user_id": "u0001",
        "type": kind,
        "event_time": iso(minute),
        **amount,
        **more,
    }


def pay(payment_id: str, order: str, minute: float, amount: float = 20.0) -> dict:
    return {"payment_id": payment_id, "order_id": order, "amount": amount, "paid_at": iso(minute)}


class Log:
    """Records of both topics, each partition's offsets counted on across batches."""

    def __init__(self, settings: Settings) -> None:
        self.topics = {"e": settings.kafka.order_events_topic, "p": settings.kafka.payments_topic}
        self.next: dict[tuple[str, int], int] = {}

    def batch(self, spark, records: list[tuple[str, int, str, dict | bytes]]):
        """(topic e|p, partition, key, value) in log order."""
        rows = []
        for kind, partition, key, value in records:
            topic = self.topics[kind]
            offset = self.next.get((topic, partition), 0)
            self.next[(topic, partition)] = offset + 1
            body = value if isinstance(value, bytes) else json.dumps(value).encode()
            rows.append((key.encode(), body, topic, partition, offset, KAFKA_TIME, 0))
        return rows_frame(spark, rows, KAFKA)


FIRST = [
    ("e", 0, "o1", event("e1", "o1", "placed", 0)),
    ("e", 0, "o1", event("e2", "o1", "paid", 1)),
    ("e", 1, "o2", event("e3", "o2", "placed", 0)),
    ("e", 1, "o2", event("e4", "o2", "shipped", 2)),  # shipped before paid: rejected
    ("p", 0, "o1", pay("p1", "o1", 1)),
    ("p", 0, "o1", pay("p1", "o1", 1)),  # the same payment twice in one batch
    ("e", 0, "o1", b'{"event_id": "e9", '),  # malformed
]
SECOND = [
    ("e", 0, "o1", event("e2", "o1", "paid", 1)),  # redelivered from the first batch
    ("e", 1, "o2", event("e5", "o2", "paid", 3)),  # applied after the rejected shipped
    ("e", 1, "o2", event("e6", "o2", "shipped", 4)),
    ("e", 0, "o3", event("e7", "o3", "paid", 0)),  # an order never placed
    ("e", 0, "o4", event("e8", "o3", "placed", 0)),  # keyed by another order
    ("p", 1, "o2", pay("p2", "o2", 3)),
    ("p", 0, "o1", pay("p1", "o1", 2, amount=99)),  # a later, conflicting delivery
]
THIRD = [
    ("e", 0, "o1", event("e10", "o1", "shipped", 5)),
    ("e", 0, "o1", event("e11", "o1", "delivered", 6)),
    ("e", 1, "o2", event("e3", "o2", "placed", 9)),  # a conflicting redelivery
    ("e", 0, "o3", event("e12", "o3", "placed", 7)),  # placed at last
    ("e", 0, "o3", event("e13", "o3", "cancelled", 8)),
    ("p", 1, "o2", pay("p3", "o2", 4, amount=1)),  # a second payment of the order
    ("p", 1, "o2", {"payment_id": "p4", "order_id": "o2", "amount": -1, "paid_at": iso(4)}),
]
SENT = len(FIRST) + len(SECOND) + len(THIRD)


@dataclass(frozen=True)
class Streamed:
    settings: Settings
    versions_before_last_retry: dict[str, int | None]
    versions_after_last_retry: dict[str, int | None]


def versions(spark, settings: Settings) -> dict[str, int | None]:
    tables = (LIVE.raw, LIVE.quarantine, LIVE.order_events, LIVE.payments, LIVE.state)
    tables += (LIVE.rejected, LIVE.progress)
    return {t.name: table_version(spark, t, settings) for t in tables if t is not None}


class Crash(Exception):
    pass


@pytest.fixture(scope="module")
def streamed(spark, tmp_path_factory) -> Streamed:
    folder: Path = tmp_path_factory.mktemp("commerce")
    settings = local_lakehouse(folder)
    log = Log(settings)
    batches = [log.batch(spark, records) for records in (FIRST, SECOND, THIRD)]
    checkpoint = str(query_checkpoint(folder / "query", "commerce-1"))
    CommerceProcessor(settings, LIVE, checkpoint)(batches[0], 0)

    def crashing(step: str, batch: int) -> None:
        patch = pytest.MonkeyPatch()

        def crash(*args, **kwargs) -> None:
            raise Crash(step)

        patch.setattr(BatchWrite, step, crash)
        try:
            with pytest.raises(Crash):
                CommerceProcessor(settings, LIVE, checkpoint)(batches[batch], batch)
        finally:
            patch.undo()
        # The stream restarts and Spark hands the batch over again.
        CommerceProcessor(settings, LIVE, checkpoint)(batches[batch], batch)

    crashing("merge_state", 1)  # its appends committed, not its state
    CommerceProcessor(settings, LIVE, checkpoint)(batches[2], 2)
    before = versions(spark, settings)
    CommerceProcessor(settings, LIVE, checkpoint)(batches[2], 2)
    return Streamed(settings, before, versions(spark, settings))


def rows(spark, streamed: Streamed, target) -> list[dict]:
    return [r.asDict() for r in read_table(spark, target, streamed.settings).collect()]


def test_every_record_is_accounted_for_once(spark, streamed: Streamed) -> None:
    progress = sorted(rows(spark, streamed, LIVE.progress), key=lambda r: r["batch_id"])
    assert [r["batch_id"] for r in progress] == [0, 1, 2]
    for row in progress:
        parts = row["order_events"] + row["payments"] + row["quarantined"] + row["duplicates"]
        assert row["records"] == parts, row
        assert row["applied"] + row["rejected"] == row["order_events"]
    assert sum(r["records"] for r in progress) == SENT
    assert [(r["quarantined"], r["duplicates"]) for r in progress] == [(1, 1), (1, 2), (1, 1)]
    assert len(rows(spark, streamed, LIVE.raw)) == SENT, "bronze: every record as received"
    quarantine = rows(spark, streamed, LIVE.quarantine)
    assert sorted(r["reason"] for r in quarantine) == [
        "invalid_value:amount",
        "key_mismatch",
        "malformed_json",
    ]
    kafka = streamed.settings.kafka
    assert progress[-1]["offsets"] == {
        f"{kafka.order_events_topic}:0": 10,
        f"{kafka.order_events_topic}:1": 5,
        f"{kafka.payments_topic}:1": 3,
    }, "the next offset of each partition the last batch read"


def test_silver_holds_each_id_once_as_first_delivered(spark, streamed: Streamed) -> None:
    events = rows(spark, streamed, LIVE.order_events)
    assert sorted(r["event_id"] for r in events) == sorted(
        ["e1", "e2", "e3", "e4", "e5", "e6", "e7", "e10", "e11", "e12", "e13"]
    )
    [e3] = [r for r in events if r["event_id"] == "e3"]
    assert e3["event_time"].replace(tzinfo=UTC) == T0, "the first delivery, not the conflicting one"
    payments = {r["payment_id"]: float(r["amount"]) for r in rows(spark, streamed, LIVE.payments)}
    assert payments == {"p1": 20.0, "p2": 20.0, "p3": 1.0}


def test_the_state_is_the_lifecycle_in_log_order(spark, streamed: Streamed) -> None:
    state = {r["order_id"]: r for r in rows(spark, streamed, LIVE.state)}
    assert {o: (s["status"], s["events_applied"], s["rejected"]) for o, s in state.items()} == {
        "o1": ("delivered", 4, 0),
        "o2": ("shipped", 3, 1),
        "o3": ("cancelled", 2, 1),
    }
    rejected = {r["event_id"]: r["reason"] for r in rows(spark, streamed, LIVE.rejected)}
    assert rejected == {
        "e4": "invalid_transition:placed->shipped",
        "e7": "invalid_transition:none->paid",
    }, "each refused once, though their batches were retried"


def test_the_live_state_equals_the_batch_fold_of_bronze(spark, streamed: Streamed) -> None:
    folded, rejected = fold_bronze(spark, streamed.settings)
    live = read_table(spark, LIVE.state, streamed.settings)
    assert state_differences(live, folded).collect() == []
    live_rejected = read_table(spark, LIVE.rejected, streamed.settings)
    assert state_differences(live_rejected, rejected).collect() == []


def test_a_batch_retried_after_it_committed_writes_nothing(streamed: Streamed) -> None:
    assert streamed.versions_after_last_retry == streamed.versions_before_last_retry


def test_a_replay_writes_its_own_tables(spark, tmp_path) -> None:
    settings = local_lakehouse(tmp_path)
    replay = CommerceOutputs.replay("v7")
    checkpoint = str(query_checkpoint(tmp_path / "query", "replay-1"))
    CommerceProcessor(settings, replay, checkpoint)(Log(settings).batch(spark, FIRST), 0)
    assert replay.state.name == "replay_v7.order_state"
    state = read_table(spark, replay.state, settings)
    assert sorted(r["order_id"] for r in state.collect()) == ["o1", "o2"]
    assert not (tmp_path / "lakehouse" / "bronze").exists(), "no copy of the log"
    assert read_table(spark, replay.progress, settings).where(F.col("records") == 7).count() == 1
