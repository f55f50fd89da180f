"""What the CDC stream tests share: a capture of their own (connector, slot, publication and
topics of the test's own over the shop tables), the changes a ledger says Debezium must publish,
and the CDC tables read back as the ledger writes rows.

A test's connector writes topics under this run's prefix (deleted at the end of the run), so
its changelog stream reads only what its own connector published, and nothing another module
produces or quarantines reaches its tables. Its rows are under a key prefix of its own."""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
from kafka import KafkaConsumer, TopicPartition
from psycopg import sql

from lakehouse.cdc.changelog import PROGRESS, changes_table, current_table, history_table
from lakehouse.cdc.connector import (
    delete_connector,
    drop_replication_slot,
    register_connector,
    wait_until_running,
)
from lakehouse.cdc.database import connect
from lakehouse.cdc.shop import CAPTURED
from lakehouse.core.config import CdcSettings, Settings, load_settings
from lakehouse.core.tables import Table
from lakehouse.generator.ledger import read_ledger
from lakehouse.generator.shop_apply import apply_changes
from lakehouse.generator.shop_changes import (
    KEY_UPDATE,
    TABLE_KEYS,
    ChangeConfig,
    final_rows,
    json_row,
)
from tests.conftest import RUN_ID, TOPIC_PREFIX

Key = tuple[str, str]  # (table, primary key)


def database(cdc: CdcSettings) -> psycopg.Connection[tuple[Any, ...]]:
    """The shop database as the platform connects to it, each statement committed."""
    return connect(cdc, "tributary-tests", autocommit=True)


def new_key_prefix() -> str:
    """A generator key prefix of this test's own (at most 20 characters)."""
    return f"s{RUN_ID}{uuid.uuid4().hex[:4]}-"


def own_capture_settings(cdc: CdcSettings) -> CdcSettings:
    own = f"{RUN_ID}_{uuid.uuid4().hex[:6]}"
    return cdc.model_copy(
        update={
            "topic_prefix": f"{TOPIC_PREFIX}{own}",
            "connector_name": f"{TOPIC_PREFIX}{own}",
            "slot_name": f"test_{own}",
            "publication_name": f"test_{own}",
        }
    )


@contextlib.contextmanager
def own_capture(cdc: CdcSettings, key_prefix: str) -> Iterator[CdcSettings]:
    """A running connector of the caller's own over the shop tables; at the end the connector,
    its slot and publication and the rows under `key_prefix` are gone."""
    own = own_capture_settings(cdc)
    try:
        register_connector(own)
        wait_until_running(own)
        yield own
    finally:
        delete_connector(own)
        drop_replication_slot(own)
        with database(cdc) as db:
            for table, key in TABLE_KEYS.items():
                db.execute(
                    sql.SQL("DELETE FROM {} WHERE starts_with({}, %s)").format(
                        sql.Identifier(cdc.schema_name, table), sql.Identifier(key)
                    ),
                    (key_prefix,),
                )


def job_env(lake: Path, cdc: CdcSettings, **more: str) -> dict[str, str]:
    """The changelog job's environment: a local lakehouse in `lake`, the capture's topics."""
    return {
        "TRIBUTARY_PROFILE": "local",
        "TRIBUTARY__STORAGE__ROOT": str(lake / "lakehouse"),
        "TRIBUTARY__STORAGE__CHECKPOINTS": str(lake / "checkpoints"),
        "TRIBUTARY__CDC__TOPIC_PREFIX": cdc.topic_prefix,
        "TRIBUTARY__CDC__CONNECTOR_NAME": cdc.connector_name,
        "TRIBUTARY__CDC__SLOT_NAME": cdc.slot_name,
        "TRIBUTARY__CDC__PUBLICATION_NAME": cdc.publication_name,
        **more,
    }


def settings_of(env: Mapping[str, str]) -> Settings:
    import os

    return load_settings("local", {**os.environ, **env})


def expected_changes(entries: Sequence[Mapping[str, Any]]) -> Counter[str]:
    """Row changes Debezium publishes for a ledger, per table: one per change, and a primary-key
    update is two (a delete of the old key and a create of the new one)."""
    counts: Counter[str] = Counter()
    for entry in entries:
        counts[entry["table"]] += 2 if entry["op"] == KEY_UPDATE else 1
    return counts


def _prefixed(cdc: CdcSettings, table: str, key: bytes | None, prefix: str) -> bool:
    if key is None:
        return False
    try:
        value = json.loads(key).get(TABLE_KEYS[table])
    except (ValueError, AttributeError):
        return False
    return isinstance(value, str) and value.startswith(prefix)


def _lsn(value: bytes) -> int | None:
    """A change's LSN; None for a record that is no change (a test's malformed one)."""
    try:
        lsn = json.loads(value)["source"]["lsn"]
    except (ValueError, KeyError, TypeError):
        return None
    return lsn if isinstance(lsn, int) else None


def published_changes(settings: Settings, cdc: CdcSettings, prefix: str) -> Counter[str]:
    """Distinct row changes (key and LSN) under `prefix` the capture's topics hold now."""
    consumer = KafkaConsumer(
        bootstrap_servers=settings.kafka.bootstrap_servers, enable_auto_commit=False
    )
    seen: dict[str, set[tuple[bytes, int]]] = {t: set() for t in TABLE_KEYS}
    try:
        topics = consumer.topics()
        partitions = {
            TopicPartition(cdc.topic(t), 0): t for t in TABLE_KEYS if cdc.topic(t) in topics
        }
        if not partitions:
            return Counter()
        consumer.assign(list(partitions))
        consumer.seek_to_beginning()
        ends = consumer.end_offsets(list(partitions))
        while any(consumer.position(p) < ends[p] for p in partitions):
            for partition, records in consumer.poll(500).items():
                table = partitions[partition]
                for r in records:
                    if r.value is not None and _prefixed(cdc, table, r.key, prefix):
                        lsn = _lsn(r.value)
                        if lsn is not None:
                            seen[table].add((r.key, lsn))
    finally:
        consumer.close()
    return Counter({t: len(changes) for t, changes in seen.items() if changes})


def wait_until_published(
    settings: Settings,
    cdc: CdcSettings,
    prefix: str,
    entries: Sequence[Mapping[str, Any]],
    timeout: float = 120,
) -> None:
    """Until the capture's topics hold every change of the ledger: the changelog stream run
    with --available-now reads what the topics hold when it starts."""
    want = expected_changes(entries)
    deadline = time.monotonic() + timeout
    while (got := published_changes(settings, cdc, prefix)) != want:
        assert time.monotonic() < deadline, f"after {timeout:.0f}s published {got}, want {want}"
        time.sleep(1)


def end_offsets(settings: Settings, cdc: CdcSettings) -> dict[str, int]:
    """topic:partition -> the next offset, for each of the capture's topics."""
    consumer = KafkaConsumer(bootstrap_servers=settings.kafka.bootstrap_servers)
    try:
        partitions = [TopicPartition(cdc.topic(t), 0) for t in cdc.tables]
        return {
            f"{p.topic}:{p.partition}": int(end)
            for p, end in consumer.end_offsets(partitions).items()
        }
    finally:
        consumer.close()


def table_rows(settings: Settings, target: Table) -> list[dict[str, Any]]:
    """A local CDC table's rows, read with delta-rs: checks cost no Spark job, and the tables
    are shown to be readable by any Delta reader."""
    from deltalake import DeltaTable

    path = target.path(settings)
    if not Path(path, "_delta_log").exists():
        return []
    return DeltaTable(path).to_pyarrow_table().to_pylist()


def _keyed(row: Mapping[str, Any], table: str) -> str | None:
    key = json.loads(row["key_json"]).get(TABLE_KEYS[table]) if row["key_json"] else None
    return key if isinstance(key, str) else None


def current_under(settings: Settings, prefix: str) -> dict[Key, Any]:
    """silver.<t>_current's rows under `prefix`, (table, key) -> row as the ledger has it."""
    found: dict[Key, Any] = {}
    for name, key in TABLE_KEYS.items():
        captured = CAPTURED[name]
        for row in table_rows(settings, current_table(captured)):
            if row[key].startswith(prefix):
                found[(name, row[key])] = json_row({c: row[c] for c in captured.column_names})
    return found


def ledger_current(entries: Sequence[Mapping[str, Any]]) -> dict[Key, Any]:
    return {where: row for where, row in final_rows(entries).items() if row is not None}


def history_under(settings: Settings, prefix: str) -> dict[Key, list[dict[str, Any]]]:
    """silver.<t>_history's versions under `prefix`, per key in commit order: the row and
    whether the version is open (is_current) or was ended by a delete."""
    found: dict[Key, list[dict[str, Any]]] = {}
    for name, key in TABLE_KEYS.items():
        captured = CAPTURED[name]
        rows = [
            r for r in table_rows(settings, history_table(captured)) if r[key].startswith(prefix)
        ]
        for row in sorted(rows, key=lambda r: (r[key], r["lsn"])):
            version = json_row({c: row[c] for c in captured.column_names})
            flags = {"is_current": row["is_current"], "deleted": row["deleted"]}
            found.setdefault((name, row[key]), []).append(version | flags)
    return found


def ledger_history(entries: Sequence[Mapping[str, Any]]) -> dict[Key, list[dict[str, Any]]]:
    """The versions a ledger's changes make: every change that leaves a row opens one (the
    generator's every update moves the business clock, so it changes the row); the key's next
    change ends it, a delete (or the key moved away) with `deleted`."""
    versions: dict[Key, list[dict[str, Any]]] = {}

    def end(where: Key, deleted: bool) -> None:
        if versions.get(where) and versions[where][-1]["is_current"]:
            versions[where][-1] |= {"is_current": False, "deleted": deleted}

    for entry in entries:
        if entry.get("old_key") is not None:
            end((entry["table"], entry["old_key"]), deleted=True)
        where = (entry["table"], entry["key"])
        if entry["row"] is None:
            end(where, deleted=True)
            continue
        end(where, deleted=False)
        versions.setdefault(where, []).append(entry["row"] | {"is_current": True, "deleted": False})
    return versions


def bronze_changes(settings: Settings) -> dict[str, list[dict[str, Any]]]:
    """bronze.<t>_changes per table."""
    return {name: table_rows(settings, changes_table(c)) for name, c in CAPTURED.items()}


def bronze_changes_under(settings: Settings, prefix: str) -> dict[str, tuple[int, int, int]]:
    """Per table: (row changes, distinct (key, lsn) among them, tombstones) under `prefix`."""
    counts = {}
    for name, rows in bronze_changes(settings).items():
        mine = [r for r in rows if (_keyed(r, name) or "").startswith(prefix)]
        live = [r for r in mine if not r["tombstone"]]
        distinct = {(r["key_json"], r["lsn"]) for r in live}
        counts[name] = (len(live), len(distinct), len(mine) - len(live))
    return counts


def progress_rows(settings: Settings) -> list[dict[str, Any]]:
    rows = sorted(table_rows(settings, PROGRESS), key=lambda r: r["batch_id"])
    return [r | {"applied": dict(r["applied"]), "offsets": dict(r["offsets"])} for r in rows]


def generate(
    cdc: CdcSettings, prefix: str, ledger: Path, count: int, seed: int, **options: Any
) -> list[dict[str, Any]]:
    """`count` changes under `prefix` (after the 5 users and 10 products a first run seeds);
    the ledger's entries. `rate` and `per_transaction` are apply_changes'."""
    rate = options.pop("rate", None)
    per_transaction = options.pop("per_transaction", 1)
    cfg = ChangeConfig(
        count=count,
        seed=seed,
        start=datetime.now(UTC) - timedelta(hours=1),
        users=5,
        products=10,
        key_prefix=prefix,
        **options,
    )
    apply_changes(cdc, cfg, ledger, rate=rate, per_transaction=per_transaction)
    return read_ledger(ledger)


def assert_tables_as_the_ledger_says(
    settings: Settings, prefix: str, entries: Sequence[Mapping[str, Any]]
) -> dict[str, tuple[int, int, int]]:
    """Current rows and history as the ledger's changes leave them, and bronze holding each
    of its changes (by key and LSN) at least once; bronze's counts per table."""
    assert current_under(settings, prefix) == ledger_current(entries)
    assert history_under(settings, prefix) == ledger_history(entries)
    changes = expected_changes(entries)
    tombstones = Counter(e["table"] for e in entries if e["row"] is None or e.get("old_key"))
    bronze = bronze_changes_under(settings, prefix)
    for table, (received, distinct, tombstoned) in bronze.items():
        assert distinct == changes[table], f"{table}: each change of the ledger, by LSN"
        assert received >= distinct and tombstoned >= tombstones[table], table
    return bronze


def assert_progress_adds_up(settings: Settings, cdc: CdcSettings, quarantined: int = 0) -> None:
    """Every record of the capture's topics up to where the stream read (from offset 0)
    read once, and each row change applied once. Not "up to the topics' ends": the capture
    takes every row of the shop's tables, and other tests write to them meanwhile (the
    ledger checks say each of this test's changes arrived)."""
    progress = progress_rows(settings)
    reached: dict[str, int] = {}
    for p in progress:
        for where, offset in p["offsets"].items():
            reached[where] = max(reached.get(where, 0), offset)
    assert sum(p["records"] for p in progress) == sum(reached.values()), "each record once"
    assert sum(p["quarantined"] for p in progress) == quarantined
    ends = end_offsets(settings, cdc)
    assert all(where in ends and offset <= ends[where] for where, offset in reached.items())
    bronze = bronze_changes(settings)
    for name, rows in bronze.items():
        distinct = {(r["key_json"], r["lsn"]) for r in rows if not r["tombstone"]}
        applied = sum(p["applied"].get(name, 0) for p in progress)
        assert applied == len(distinct), f"{name}: each row change applied once"
    tombstones = sum(r["tombstone"] for rows in bronze.values() for r in rows)
    assert sum(p["tombstones"] for p in progress) == tombstones
