"""The Debezium PostgreSQL connector on Kafka Connect: its config from the settings, and
register / status / restart / delete through Connect's REST API.

Every captured table must have a primary key: Debezium keys each change by it, and the
changelog topic is compacted by key. A table without one is refused before the connector is
registered (primary_key_problems), never captured with null keys."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lakehouse.cdc.database import CdcError, connect
from lakehouse.core.config import CdcSettings

__all__ = ["CdcError"]  # raised by every capture function, defined with the database's

CONNECTOR_CLASS = "io.debezium.connector.postgresql.PostgresConnector"
# The Connect worker reads the password from its own environment (infra/connect/
# worker.properties, config.providers): the config the REST API shows and the config topic
# keeps only names it.
PASSWORD_REFERENCE = "${env:TRIBUTARY_POSTGRES_PASSWORD}"
# The table the source signalling channel reads (infra/postgres/signal.sql): an INSERT of an
# `execute-snapshot` row makes the connector snapshot the tables it names, while it streams.
# Debezium captures it whatever table.include.list says.
SIGNAL_TABLE = "debezium_signal"
# A worker answers 409 while its group rebalances (just started, a connector just changed).
REBALANCE_WAIT_SECONDS = 60.0


@dataclass(frozen=True)
class TaskState:
    id: int
    state: str  # RUNNING, FAILED, PAUSED, UNASSIGNED, RESTARTING
    trace: str | None


@dataclass(frozen=True)
class ConnectorStatus:
    name: str
    state: str
    tasks: tuple[TaskState, ...]

    @property
    def running(self) -> bool:
        """The connector and every one of its tasks run (a connector has a task once started)."""
        return (
            self.state == "RUNNING"
            and bool(self.tasks)
            and all(t.state == "RUNNING" for t in self.tasks)
        )


def connector_config(
    cdc: CdcSettings, topic_settings: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The connector's config: one compacted topic per table, <prefix>.<schema>.<table>, keyed
    by the primary key; decimals as strings (exact); a tombstone after each delete, so that
    compaction can drop a deleted key; a snapshot of the tables' rows before the first change.
    `topic_settings` are further Kafka settings of the topics it creates (segment.ms, ...);
    the cleanup policy stays compact."""
    extra = {f"topic.creation.default.{k}": v for k, v in (topic_settings or {}).items()}
    if extra.get("topic.creation.default.cleanup.policy", "compact") != "compact":
        raise CdcError("a changelog topic must be compacted: keep cleanup.policy=compact")
    # The cleaner leaves every record alone for a week: a changelog stream that was stopped
    # for less still reads each change, not only the latest per key.
    kept = {"topic.creation.default.min.compaction.lag.ms": str(7 * 24 * 3600 * 1000)}
    return (
        kept
        | extra
        | {
            "connector.class": CONNECTOR_CLASS,
            "tasks.max": "1",
            "plugin.name": "pgoutput",
            "database.hostname": cdc.database_host,
            "database.port": str(cdc.database_port),
            "database.user": cdc.user,
            "database.password": PASSWORD_REFERENCE,
            "database.dbname": cdc.database,
            "topic.prefix": cdc.topic_prefix,
            "table.include.list": ",".join(_include_pattern(cdc, t) for t in cdc.tables),
            "slot.name": cdc.slot_name,
            "publication.name": cdc.publication_name,
            # Debezium creates the publication for exactly the listed tables and keeps it in step
            # when the list changes.
            "publication.autocreate.mode": "filtered",
            "decimal.handling.mode": "string",
            "tombstones.on.delete": "true",
            "snapshot.mode": "initial",
            # A heartbeat record every 10 s moves the committed offset (and the slot's
            # confirmed LSN) on even while the captured tables are quiet: the first offset is
            # committed right after the snapshot, and the slot does not hold the WAL of other
            # tables' writes.
            "heartbeat.interval.ms": "10000",
            # Its topic, <prefix>.heartbeat.<prefix>, under the capture's own prefix.
            "topic.heartbeat.prefix": f"{cdc.topic_prefix}.heartbeat",
            "signal.data.collection": f"{cdc.schema_name}.{SIGNAL_TABLE}",
            "topic.creation.default.cleanup.policy": "compact",
            "topic.creation.default.replication.factor": "1",
            "topic.creation.default.partitions": "1",
        }
    )


def _include_pattern(cdc: CdcSettings, table: str) -> str:
    # table.include.list holds regular expressions matched against schema.table.
    return f"{cdc.schema_name}\\.{table}"


# For each listed table: whether it exists and whether it has a primary key, from the catalog.
_PRIMARY_KEYS = """
SELECT t.name,
       c.oid IS NOT NULL AS present,
       EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conrelid = c.oid AND k.contype = 'p')
FROM unnest(%s::text[]) AS t(name)
LEFT JOIN pg_class c
       ON c.relname = t.name AND c.relkind IN ('r', 'p')
      AND c.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = %s)
"""


def primary_key_problems(cdc: CdcSettings, found: dict[str, tuple[bool, bool]]) -> list[str]:
    """One line per listed table that cannot be captured, from {table: (exists, has_pk)}."""
    problems = []
    for table in cdc.tables:
        present, has_key = found.get(table, (False, False))
        name = f"{cdc.schema_name}.{table}"
        if not present:
            problems.append(
                f"table {name} does not exist in database {cdc.database}; "
                "create it or take it out of cdc.tables"
            )
        elif not has_key:
            problems.append(
                f"table {name} has no primary key, so its changes cannot be captured: each "
                "change is keyed by the primary key and the changelog topic keeps the latest "
                f"change per key; add one (ALTER TABLE {name} ADD PRIMARY KEY (...)) or take "
                "it out of cdc.tables"
            )
    return problems


def check_tables(cdc: CdcSettings) -> None:
    """Raise CdcError unless every listed table exists and has a primary key."""
    with connect(cdc) as conn:
        rows = conn.execute(_PRIMARY_KEYS, (list(cdc.tables), cdc.schema_name)).fetchall()
    problems = primary_key_problems(cdc, {name: (present, pk) for name, present, pk in rows})
    if problems:
        raise CdcError("; ".join(problems))


def register_connector(cdc: CdcSettings, topic_settings: Mapping[str, str] | None = None) -> bool:
    """Create the connector or update its config (idempotent), once every listed table is
    known to have a primary key. True if it was created."""
    check_tables(cdc)
    config = connector_config(cdc, topic_settings)
    status, _ = _request(cdc, "PUT", f"/connectors/{_name(cdc)}/config", config)
    return status == 201


def connector_status(cdc: CdcSettings) -> ConnectorStatus | None:
    """The connector's and its tasks' states as Connect reports them; None if not registered."""
    status, body = _request(cdc, "GET", f"/connectors/{_name(cdc)}/status", missing_ok=True)
    if status == 404:
        return None
    tasks = tuple(
        TaskState(id=int(t["id"]), state=str(t["state"]), trace=t.get("trace"))
        for t in body.get("tasks", [])
    )
    return ConnectorStatus(name=cdc.connector_name, state=body["connector"]["state"], tasks=tasks)


def wait_until_running(cdc: CdcSettings, timeout: float = 90.0) -> ConnectorStatus:
    """Wait for the connector and its task to run; a failed task is raised with its trace."""
    deadline = time.monotonic() + timeout
    status = None
    while time.monotonic() < deadline:
        status = connector_status(cdc)
        if status is not None and status.running:
            return status
        failed = [t for t in status.tasks if t.state == "FAILED"] if status else []
        if failed:
            trace = (failed[0].trace or "").strip().splitlines()
            raise CdcError(
                f"connector {cdc.connector_name}: task {failed[0].id} FAILED: "
                f"{trace[0] if trace else 'no trace'}; see the Connect log, fix, then restart"
            )
        time.sleep(1)
    raise CdcError(
        f"connector {cdc.connector_name} is not running after {timeout:.0f}s "
        f"(state: {status.state if status else 'not registered'}); see the Connect log"
    )


def committed_offsets(cdc: CdcSettings) -> list[dict[str, Any]]:
    """The source offsets Kafka Connect has committed for the connector (its REST offsets
    endpoint): [] until its first commit."""
    _, body = _request(cdc, "GET", f"/connectors/{_name(cdc)}/offsets", missing_ok=True)
    offsets = body.get("offsets", []) if isinstance(body, dict) else []
    return [o for o in offsets if isinstance(o, dict)]


def wait_until_committed(cdc: CdcSettings, timeout: float = 90.0) -> None:
    """Wait for the connector's first committed offset. Until then a worker that dies leaves
    Debezium no position to resume from: the restarted connector snapshots the tables again
    at a later LSN, and the versions between reach the topics only as their latest rows."""
    deadline = time.monotonic() + timeout
    while not committed_offsets(cdc):
        if time.monotonic() > deadline:
            raise CdcError(
                f"connector {cdc.connector_name} has committed no offset after {timeout:.0f}s "
                "(its snapshot may still run); see the Connect log"
            )
        time.sleep(1)


def restart_connector(cdc: CdcSettings) -> None:
    """Restart the connector and all its tasks (resuming from the committed offsets)."""
    _request(cdc, "POST", f"/connectors/{_name(cdc)}/restart?includeTasks=true&onlyFailed=false")


def delete_connector(cdc: CdcSettings) -> bool:
    """Remove the connector. Its replication slot stays (drop_replication_slot). True if it
    existed."""
    status, _ = _request(cdc, "DELETE", f"/connectors/{_name(cdc)}", missing_ok=True)
    return status != 404


def slot_reader_pid(cdc: CdcSettings) -> int | None:
    """The PostgreSQL backend that streams the connector's replication slot (its task's
    connection), or None while no task reads it."""
    with connect(cdc, autocommit=True) as conn:
        query = "SELECT active_pid FROM pg_replication_slots WHERE slot_name = %s"
        row = conn.execute(query, (cdc.slot_name,)).fetchone()
    return int(row[0]) if row and row[0] is not None else None


def wait_for_new_slot_reader(cdc: CdcSettings, before: int | None, timeout: float = 90.0) -> None:
    """After a config change, wait until a task other than the one reading the slot `before`
    streams it: only that task runs the new config (Connect restarts the task asynchronously,
    and the old one goes on reading the WAL for a while)."""
    deadline = time.monotonic() + timeout
    while (pid := slot_reader_pid(cdc)) is None or pid == before:
        if time.monotonic() > deadline:
            raise CdcError(
                f"connector {cdc.connector_name}: no restarted task reads replication slot "
                f"{cdc.slot_name} {timeout:.0f}s after its config changed; see the Connect log"
            )
        time.sleep(0.5)


def drop_replication_slot(cdc: CdcSettings, timeout: float = 30.0) -> bool:
    """Drop the connector's slot and publication (the WAL the slot holds is freed; a new
    connector snapshots again). Delete the connector first: its task lets go of the slot
    within seconds, and this waits for that. True if there was a slot."""
    from psycopg import sql

    with connect(cdc, autocommit=True) as conn:
        slot = "SELECT active FROM pg_replication_slots WHERE slot_name = %s"
        deadline = time.monotonic() + timeout
        while (row := conn.execute(slot, (cdc.slot_name,)).fetchone()) and row[0]:
            if time.monotonic() > deadline:
                raise CdcError(
                    f"replication slot {cdc.slot_name} is still in use after {timeout:.0f}s; "
                    f"delete connector {cdc.connector_name} first"
                )
            time.sleep(0.5)
        if row is not None:
            conn.execute("SELECT pg_drop_replication_slot(%s)", (cdc.slot_name,))
        conn.execute(
            sql.SQL("DROP PUBLICATION IF EXISTS {}").format(sql.Identifier(cdc.publication_name))
        )
    return row is not None


def _name(cdc: CdcSettings) -> str:
    return urllib.parse.quote(cdc.connector_name, safe="")


def _request(
    cdc: CdcSettings,
    method: str,
    path: str,
    body: dict[str, str] | None = None,
    missing_ok: bool = False,
) -> tuple[int, Any]:
    """One REST call to Connect, retried while its group rebalances (409). Returns (status,
    parsed body). Any other error is a CdcError with Connect's own message."""
    url = cdc.connect_url.rstrip("/") + path
    data = json.dumps(body).encode() if body is not None else None
    deadline = time.monotonic() + REBALANCE_WAIT_SECONDS
    while True:
        request = urllib.request.Request(url, data=data, method=method)
        request.add_header("Content-Type", "application/json")
        request.add_header("Accept", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                raw = response.read()
                return response.status, json.loads(raw) if raw else {}
        except urllib.error.HTTPError as err:
            if err.code == 404 and missing_ok:
                return 404, {}
            message = _error_message(err)
            if err.code == 409 and time.monotonic() < deadline:
                time.sleep(1)
                continue
            raise CdcError(
                f"Kafka Connect at {cdc.connect_url} refused {method} {path}: {err.code} {message}"
            ) from None
        except (urllib.error.URLError, OSError) as err:
            reason = getattr(err, "reason", err)
            raise CdcError(
                f"Kafka Connect at {cdc.connect_url} cannot be reached ({reason}); "
                "start it with `make up`"
            ) from None


def _error_message(err: urllib.error.HTTPError) -> str:
    try:
        return str(json.loads(err.read()).get("message", ""))
    except (ValueError, OSError):
        return err.reason
