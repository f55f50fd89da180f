"""Keeping the capture running (what the cdc DAG does with the connector): register it when it
is missing, bring its config in step with the settings, restart a failed one through Connect's
REST API, and snapshot a table added while it streams (Debezium's incremental snapshot).

The connector's table list lives in Connect (its config topic), not only in the settings: a
table added through `snapshot_new_table` stays captured, and bringing the config in step with
the settings keeps it, so a scheduled run never undoes an operator's addition.
"""

from __future__ import annotations

import contextlib
import json
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from lakehouse.cdc.connector import (
    SIGNAL_TABLE,
    CdcError,
    ConnectorStatus,
    _include_pattern,
    _name,
    _request,
    check_tables,
    connector_config,
    connector_status,
    register_connector,
    restart_connector,
    slot_reader_pid,
    wait_for_new_slot_reader,
    wait_until_committed,
    wait_until_running,
)
from lakehouse.cdc.database import connect
from lakehouse.core.config import CdcSettings, Settings

_TABLE_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


@dataclass(frozen=True)
class CaptureCheck:
    outcome: str  # one line: what was found and done
    status: ConnectorStatus


def describe(status: ConnectorStatus) -> str:
    tasks = ", ".join(f"task {t.id} {t.state}" for t in status.tasks) or "no task yet"
    return f"connector {status.name} {status.state} ({tasks})"


def ensure_connector(
    cdc: CdcSettings, timeout: float = 90.0, topic_settings: Mapping[str, str] | None = None
) -> CaptureCheck:
    """Register the connector if it is missing, bring its config in step with the settings,
    and see that it and its task run: a FAILED one is restarted once through the REST API and
    checked again. CdcError (with the task's trace) if it still does not run."""
    done = []
    status = connector_status(cdc)
    if status is None:
        register_connector(cdc, topic_settings)
        done.append(f"registered connector {cdc.connector_name}")
    elif _update_config(cdc, topic_settings):
        done.append("brought its config in step with the settings")
    status = connector_status(cdc)
    if status is not None and _failed(status):
        done.append(f"restarted it ({describe(status)})")
        restart_connector(cdc)
    status = wait_until_running(cdc, timeout)
    if done[:1] == [f"registered connector {cdc.connector_name}"]:
        # Until its first commit a crash of the worker would lose versions (see the wait).
        wait_until_committed(cdc, timeout)
        done.append("its snapshot's offset committed")
    return CaptureCheck("; ".join([*done, describe(status)]), status)


def ensure_changelog_topics(
    settings: Settings, topic_settings: Mapping[str, str] | None = None
) -> list[str]:
    """Create the captured tables' topics that do not exist yet, as Debezium would (compacted,
    with the connector's topic settings): Debezium creates a table's topic with its first
    change, and the changelog stream cannot start on a topic that is missing. The topics
    created."""
    from kafka.admin import NewTopic
    from kafka.errors import TopicAlreadyExistsError

    from lakehouse.core.kafka_io import _admin

    prefix = "topic.creation.default."
    config = connector_config(settings.cdc, topic_settings)
    shape = {"partitions", "replication.factor"}
    topic_configs = {
        k.removeprefix(prefix): v
        for k, v in config.items()
        if k.startswith(prefix) and k.removeprefix(prefix) not in shape
    }
    partitions = int(config[f"{prefix}partitions"])
    replicas = int(config[f"{prefix}replication.factor"])
    wanted = [settings.cdc.topic(t) for t in settings.cdc.tables]
    admin = _admin(settings)
    try:
        missing = [t for t in wanted if t not in admin.list_topics()]
        for topic in missing:
            new = NewTopic(topic, partitions, replicas, topic_configs=topic_configs)
            # Debezium may have made it meanwhile.
            with contextlib.suppress(TopicAlreadyExistsError):
                admin.create_topics([new])
    finally:
        admin.close()
    return missing


def captured_tables(cdc: CdcSettings) -> list[str]:
    """The tables the registered connector captures (its table.include.list), in its order."""
    config = current_config(cdc)
    prefix = f"{cdc.schema_name}\\."
    listed = [p for p in config.get("table.include.list", "").split(",") if p]
    return [p.removeprefix(prefix) for p in listed]


def current_config(cdc: CdcSettings) -> dict[str, str]:
    status, config = _request(cdc, "GET", f"/connectors/{_name(cdc)}/config", missing_ok=True)
    if status == 404:
        raise CdcError(
            f"connector {cdc.connector_name} is not registered; run the cdc DAG once "
            "(its connector task registers it)"
        )
    return {str(k): str(v) for k, v in config.items()}


def snapshot_new_table(cdc: CdcSettings, table: str, timeout: float = 90.0) -> str:
    """Add `table` (of the captured schema) to the connector's tables and ask Debezium for an
    incremental snapshot of it: its rows go to its changelog topic while changes keep
    streaming. Refused (CdcError, nothing changed) unless the table exists and has a primary
    key. One line: what was done."""
    if not _TABLE_NAME.match(table):
        raise CdcError(
            f"{table!r} is not a table name: give a lower-case name of a table in schema "
            f"{cdc.schema_name} (letters, digits, _); nothing was changed"
        )
    if table == SIGNAL_TABLE:
        raise CdcError(f"{SIGNAL_TABLE} is the connector's signalling table, not a shop table")
    try:
        check_tables(cdc.model_copy(update={"tables": (table,)}))
    except CdcError as err:
        raise CdcError(f"{err}; nothing was changed") from None
    config = current_config(cdc)
    listed = [p for p in config.get("table.include.list", "").split(",") if p]
    pattern = _include_pattern(cdc, table)
    added = pattern not in listed
    if added:
        # A config change restarts the task, which adds the table to the publication. The
        # signal must reach the restarted task: the old one, still streaming for a moment,
        # would drop a snapshot request for a table it does not capture.
        reader = slot_reader_pid(cdc)
        config["table.include.list"] = ",".join([*listed, pattern])
        _request(cdc, "PUT", f"/connectors/{_name(cdc)}/config", config)
        wait_for_new_slot_reader(cdc, reader, timeout)
    wait_until_running(cdc, timeout)
    signal_id = send_snapshot_signal(cdc, table)
    what = "added it to the connector's tables and " if added else ""
    return (
        f"{cdc.schema_name}.{table}: {what}asked for an incremental snapshot (signal "
        f"{signal_id}); its rows go to topic {cdc.topic(table)}"
    )


def send_snapshot_signal(cdc: CdcSettings, table: str) -> str:
    """INSERT the `execute-snapshot` signal for `table`; the connector reads it from the WAL."""
    import psycopg
    from psycopg import sql

    signal_id = f"tributary-{uuid.uuid4()}"
    data = json.dumps({"data-collections": [f"{cdc.schema_name}.{table}"], "type": "incremental"})
    insert = sql.SQL("INSERT INTO {} (id, type, data) VALUES (%s, 'execute-snapshot', %s)")
    try:
        with connect(cdc) as conn:
            conn.execute(
                insert.format(sql.Identifier(cdc.schema_name, SIGNAL_TABLE)), (signal_id, data)
            )
    except psycopg.errors.UndefinedTable:
        raise CdcError(
            f"no signalling table {cdc.schema_name}.{SIGNAL_TABLE} in database {cdc.database}; "
            "restart PostgreSQL with `make up` (it applies infra/postgres/signal.sql)"
        ) from None
    return signal_id


def _failed(status: ConnectorStatus) -> bool:
    return status.state == "FAILED" or any(t.state == "FAILED" for t in status.tasks)


def _update_config(cdc: CdcSettings, topic_settings: Mapping[str, str] | None) -> bool:
    """PUT the settings' config over the registered one where they differ, keeping the
    tables the connector captures beyond the settings' and any further settings it has.
    True if it changed."""
    current = current_config(cdc)
    wanted = connector_config(cdc, topic_settings)
    listed = [p for p in current.get("table.include.list", "").split(",") if p]
    missing = [p for p in wanted["table.include.list"].split(",") if p not in listed]
    wanted["table.include.list"] = ",".join([*listed, *missing])
    if all(current.get(k) == v for k, v in wanted.items()):
        return False
    if missing:
        check_tables(cdc)
    _request(cdc, "PUT", f"/connectors/{_name(cdc)}/config", current | wanted)
    return True
