"""Change data capture on the real services: PostgreSQL's changes, read from its write-ahead log
by Debezium on Kafka Connect, reach the table's compacted changelog topic in commit order, and
compaction keeps the latest change per key. Every row and key is this run's own."""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType
from psycopg import sql

from lakehouse.cdc.capture import ensure_connector
from lakehouse.cdc.connector import (
    CdcError,
    committed_offsets,
    connector_status,
    delete_connector,
    drop_replication_slot,
    register_connector,
    wait_until_committed,
    wait_until_running,
)
from lakehouse.core.config import CdcSettings, Settings
from tests.conftest import RUN_ID, TOPIC_PREFIX
from tests.integration.cdc_capture import database


@dataclass(frozen=True)
class Change:
    offset: int
    key: dict[str, Any]
    value: dict[str, Any] | None  # None: the tombstone after a delete

    @property
    def op(self) -> str:
        return "tombstone" if self.value is None else str(self.value["op"])


@pytest.fixture(scope="module")
def cdc(minio_settings: Settings, connect_up: str) -> CdcSettings:
    return minio_settings.cdc


@pytest.fixture(scope="module")
def shop_connector(cdc: CdcSettings) -> CdcSettings:
    """The platform's own connector over the shop tables, as the cdc DAG keeps it: registered
    (idempotent), running, its first offset committed."""
    ensure_connector(cdc)
    wait_until_committed(cdc)
    return cdc


def end_offset(settings: Settings, topic: str) -> int:
    consumer = KafkaConsumer(bootstrap_servers=settings.kafka.bootstrap_servers)
    try:
        if topic not in consumer.topics():
            return 0
        partition = TopicPartition(topic, 0)
        return int(consumer.end_offsets([partition])[partition])
    finally:
        consumer.close()


def read_changes(
    settings: Settings,
    topic: str,
    done: Callable[[list[Change]], bool],
    start: int = 0,
    timeout: float = 60,
    key: dict[str, Any] | None = None,
) -> list[Change]:
    """The topic's records from `start` (those of `key` only, if given) once `done` holds for
    them; fails with what was read after `timeout`."""
    consumer = KafkaConsumer(
        bootstrap_servers=settings.kafka.bootstrap_servers, enable_auto_commit=False
    )
    partition = TopicPartition(topic, 0)
    changes: list[Change] = []
    deadline = time.monotonic() + timeout
    try:
        while topic not in consumer.topics():
            assert time.monotonic() < deadline, f"topic {topic} was never created"
            time.sleep(0.5)
        consumer.assign([partition])
        consumer.seek(partition, start)
        while not done(changes):
            assert time.monotonic() < deadline, f"after {timeout:.0f}s, {topic} had: {changes}"
            for record in consumer.poll(500).get(partition, []):
                change = Change(
                    offset=record.offset,
                    key=json.loads(record.key),
                    value=json.loads(record.value) if record.value is not None else None,
                )
                if key is None or change.key == key:
                    changes.append(change)
        return changes
    finally:
        consumer.close()


def read_all(settings: Settings, topic: str) -> list[Change]:
    """Every record a consumer reading the topic from the beginning gets, to its end now."""
    end = end_offset(settings, topic)
    return read_changes(settings, topic, lambda got: bool(got) and got[-1].offset >= end - 1)


def test_changes_reach_the_topic_in_commit_order_with_before_after_op_and_lsn(
    shop_connector: CdcSettings, minio_settings: Settings
) -> None:
    cdc = shop_connector
    topic = cdc.topic("orders")
    start = end_offset(minio_settings, topic)
    order = f"it-{RUN_ID}-order"
    with database(cdc) as db:
        db.execute("INSERT INTO orders VALUES (%s, 'u0007', 'placed', 12.50, now())", (order,))
        db.execute(
            "UPDATE orders SET status = 'paid', updated_at = now() WHERE order_id = %s", (order,)
        )
        db.execute(
            "UPDATE orders SET total = 13.75, updated_at = now() WHERE order_id = %s", (order,)
        )
        db.execute("DELETE FROM orders WHERE order_id = %s", (order,))

    changes = read_changes(
        minio_settings,
        topic,
        lambda got: any(c.op == "tombstone" for c in got),
        start=start,
        key={"order_id": order},
    )
    assert [c.op for c in changes] == ["c", "u", "u", "d", "tombstone"]
    created, paid, repriced, deleted = (c.value for c in changes[:4])
    assert created is not None and paid is not None and repriced is not None
    assert deleted is not None
    assert created["before"] is None
    assert created["after"]["status"] == "placed"
    assert created["after"]["total"] == "12.50", "decimals arrive as exact strings"
    assert paid["before"]["status"] == "placed" and paid["after"]["status"] == "paid"
    assert repriced["before"]["total"] == "12.50" and repriced["after"]["total"] == "13.75"
    assert deleted["after"] is None
    assert deleted["before"] == repriced["after"], "a delete carries the whole old row"
    lsns = [c.value["source"]["lsn"] for c in changes[:4] if c.value is not None]
    assert lsns == sorted(lsns) and len(set(lsns)) == 4, f"commit order: {lsns}"
    assert {c.value["source"]["table"] for c in changes[:4] if c.value is not None} == {"orders"}


def test_a_transaction_s_changes_arrive_together_in_statement_order(
    shop_connector: CdcSettings, minio_settings: Settings
) -> None:
    cdc = shop_connector
    topic = cdc.topic("orders")
    start = end_offset(minio_settings, topic)
    orders = [f"it-{RUN_ID}-tx-{i}" for i in range(3)]
    with database(cdc) as db, db.transaction():
        for order in reversed(orders):
            db.execute("INSERT INTO orders VALUES (%s, 'u0001', 'placed', 1.00, now())", (order,))
    changes = read_changes(
        minio_settings,
        topic,
        lambda got: len([c for c in got if c.key["order_id"] in orders]) == 3,
        start=start,
    )
    ours = [c for c in changes if c.key["order_id"] in orders]
    assert [c.key["order_id"] for c in ours] == list(reversed(orders))
    assert len({c.value["source"]["txId"] for c in ours if c.value is not None}) == 1


def test_the_changelog_topic_is_compacted(
    shop_connector: CdcSettings, minio_settings: Settings
) -> None:
    topic = shop_connector.topic("orders")
    admin = KafkaAdminClient(bootstrap_servers=minio_settings.kafka.bootstrap_servers)
    try:
        described = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
    finally:
        admin.close()
    configs = described["topic"][topic]
    assert configs["cleanup.policy"]["value"] == "compact"


def test_the_connector_and_its_task_run_as_connect_s_rest_api_reports(
    shop_connector: CdcSettings,
) -> None:
    status = connector_status(shop_connector)
    assert status is not None and status.running, status
    url = f"{shop_connector.connect_url}/connectors/{shop_connector.connector_name}/status"
    with urllib.request.urlopen(url, timeout=10) as response:
        reported = json.loads(response.read())
    assert reported["connector"]["state"] == "RUNNING"
    assert [task["state"] for task in reported["tasks"]] == ["RUNNING"]


def test_the_connector_s_position_is_committed_and_kept_moving_by_its_heartbeat(
    shop_connector: CdcSettings, minio_settings: Settings
) -> None:
    """A restarted worker resumes from the committed LSN; a heartbeat every 10 s commits one
    even while no captured table changes."""
    [committed] = committed_offsets(shop_connector)
    assert int(committed["offset"]["lsn"]) > 0
    prefix = shop_connector.topic_prefix
    heartbeat = f"{prefix}.heartbeat.{prefix}"
    beats = read_changes(minio_settings, heartbeat, lambda got: len(got) >= 1, timeout=30)
    assert beats[0].key == {"serverName": prefix}


@pytest.fixture
def keyless_table(cdc: CdcSettings) -> Iterator[str]:
    table = f"keyless_{RUN_ID}"
    with database(cdc) as db:
        db.execute(sql.SQL("CREATE TABLE {} (id text, v text)").format(sql.Identifier(table)))
    yield table
    with database(cdc) as db:
        db.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(table)))


def test_a_table_without_a_primary_key_is_refused_before_anything_is_registered(
    cdc: CdcSettings, keyless_table: str
) -> None:
    keyless = cdc.model_copy(
        update={
            "tables": ("orders", keyless_table),
            "connector_name": f"test-{RUN_ID}-keyless",
            "slot_name": f"test_{RUN_ID}_keyless",
            "publication_name": f"test_{RUN_ID}_keyless",
        }
    )
    with pytest.raises(CdcError) as refused:
        register_connector(keyless)
    assert str(refused.value) == (
        f"table public.{keyless_table} has no primary key, so its changes cannot be captured: "
        "each change is keyed by the primary key and the changelog topic keeps the latest "
        f"change per key; add one (ALTER TABLE public.{keyless_table} ADD PRIMARY KEY (...)) "
        "or take it out of cdc.tables"
    )
    assert connector_status(keyless) is None, "nothing was registered"


# The compaction test's own topic settings: a segment rolls at the first record after 100 ms,
# the cleaner takes any log with dirty records, and a tombstone lives 100 ms once cleaned.
# The broker's cleaner looks for work every log.cleaner.backoff.ms (15 s by default).
EAGER_COMPACTION = {
    "segment.ms": "100",
    "min.cleanable.dirty.ratio": "0.01",
    "delete.retention.ms": "100",
    "min.compaction.lag.ms": "0",
}
VERSIONS = 10


@pytest.fixture
def compaction_capture(cdc: CdcSettings) -> Iterator[CdcSettings]:
    """A connector of this test's own over a table of its own, into a topic of this run's
    (deleted at the end of the run with the run's other topics)."""
    table = f"compaction_{RUN_ID}"
    own = cdc.model_copy(
        update={
            "tables": (table,),
            "topic_prefix": f"{TOPIC_PREFIX}cdc",
            "connector_name": f"{TOPIC_PREFIX}compaction",
            "slot_name": f"test_{RUN_ID}_compaction",
            "publication_name": f"test_{RUN_ID}_compaction",
        }
    )
    name = sql.Identifier(table)
    with database(cdc) as db:
        db.execute(sql.SQL("CREATE TABLE {} (k text PRIMARY KEY, v int NOT NULL)").format(name))
        db.execute(sql.SQL("ALTER TABLE {} REPLICA IDENTITY FULL").format(name))
    try:
        register_connector(own, topic_settings=EAGER_COMPACTION)
        wait_until_running(own)
        yield own
    finally:
        delete_connector(own)
        drop_replication_slot(own)
        with database(cdc) as db:
            db.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(name))


def test_compaction_keeps_the_latest_change_per_key_and_drops_deleted_keys(
    compaction_capture: CdcSettings, minio_settings: Settings
) -> None:
    own = compaction_capture
    table = sql.Identifier(own.tables[0])
    topic = own.topic(own.tables[0])
    with database(own) as db:
        db.execute(sql.SQL("INSERT INTO {} VALUES ('kept', 0)").format(table))
        for version in range(1, VERSIONS):
            db.execute(sql.SQL("UPDATE {} SET v = %s WHERE k = 'kept'").format(table), (version,))
        db.execute(sql.SQL("INSERT INTO {} VALUES ('gone', -1)").format(table))
        db.execute(sql.SQL("DELETE FROM {} WHERE k = 'gone'").format(table))

    def gone_tombstoned(got: list[Change]) -> bool:
        return any(c.key == {"k": "gone"} and c.op == "tombstone" for c in got)

    # An early reader sees every change: the N versions, the delete and its tombstone.
    early = read_changes(minio_settings, topic, gone_tombstoned)
    kept = [c for c in early if c.key == {"k": "kept"}]
    assert [c.value["after"]["v"] for c in kept if c.value is not None] == list(range(VERSIONS))
    assert [c.op for c in early if c.key == {"k": "gone"}] == ["c", "d", "tombstone"]

    # The cleaner compacts closed segments only: each further change (of a third key) rolls
    # the one before it, until a reader from the beginning finds the log compacted.
    deadline = time.monotonic() + 90
    with database(own) as db:
        db.execute(sql.SQL("INSERT INTO {} VALUES ('roller', 0)").format(table))
        while True:
            time.sleep(0.5)
            db.execute(sql.SQL("UPDATE {} SET v = v + 1 WHERE k = 'roller'").format(table))
            late = [c for c in read_all(minio_settings, topic) if c.key != {"k": "roller"}]
            if [c.key for c in late] == [{"k": "kept"}]:
                break
            assert time.monotonic() < deadline, f"not compacted after 90 s: {late}"
            time.sleep(2)
    (latest,) = late
    assert latest.value is not None and latest.value["after"] == {"k": "kept", "v": VERSIONS - 1}
    assert latest.offset == kept[-1].offset, "the latest change itself, at its own offset"
