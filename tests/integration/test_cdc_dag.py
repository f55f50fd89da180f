"""The cdc DAG on the test Airflow, through its REST API, on the real PostgreSQL, Connect and
Kafka: a run with a new table registers the connector, starts the changelog stream and checks
its lag, reconciles the captured tables with their recompute from bronze (equal, or nothing to
compare yet), and snapshots the table into its topic. The refusals (a table without a primary
key, one that does not exist, a misspelt parameter) are run through the task functions in
tests/dags/test_cdc.py; PostgreSQL's own answer for a table without a key is checked in
tests/integration/test_cdc_capture.py."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from kafka import KafkaConsumer, TopicPartition
from psycopg import sql

import tests.integration.airflow_client as af
from lakehouse.cdc.capture import captured_tables, current_config
from lakehouse.cdc.connector import _name, _request, connector_status
from lakehouse.cdc.supervisor import ChangelogSupervisor
from lakehouse.core.config import CdcSettings, Settings
from tests.conftest import RUN_ID
from tests.integration.cdc_capture import database

DAG_ID = "cdc"
# A run starts Spark for the changelog stream and waits for its first batch.
RUN_TIMEOUT = 900


@pytest.fixture(scope="module")
def cdc(minio_settings: Settings, connect_up: str) -> CdcSettings:
    return minio_settings.cdc


@pytest.fixture(scope="module")
def tables(cdc: CdcSettings) -> Iterator[dict[str, str]]:
    """A new table with a primary key and three rows; dropped after."""
    names = {"keyed": f"carts_{RUN_ID}"}
    with database(cdc) as db:
        db.execute(
            sql.SQL("CREATE TABLE {} (cart_id text PRIMARY KEY, items int NOT NULL)").format(
                sql.Identifier(names["keyed"])
            )
        )
        db.execute(
            sql.SQL("INSERT INTO {} VALUES ('c1', 1), ('c2', 2), ('c3', 3)").format(
                sql.Identifier(names["keyed"])
            )
        )
    yield names
    with database(cdc) as db:
        for name in names.values():
            db.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(name)))


@pytest.fixture(scope="module")
def dag_ready(
    api: af.Api, cdc: CdcSettings, minio_settings: Settings, tables: dict[str, str]
) -> Iterator[ChangelogSupervisor]:
    """The DAG parsed; afterwards the changelog stream stopped, and the connector's config
    put back as it was (without this module's table)."""
    af.wait_parsed(api, DAG_ID)
    before = current_config(cdc) if connector_status(cdc) is not None else None
    supervisor = ChangelogSupervisor(minio_settings)
    held = supervisor.held()
    yield supervisor
    supervisor.stop()
    if held:
        supervisor.hold_file.write_text(held + "\n")
    if before is not None:
        _request(cdc, "PUT", f"/connectors/{_name(cdc)}/config", before)


def test_a_run_with_a_new_table_captures_it_and_keeps_the_changelog_stream_running(
    api: af.Api, dag_ready: ChangelogSupervisor, cdc: CdcSettings, tables: dict[str, str]
) -> None:
    supervisor = dag_ready
    supervisor.hold_file.unlink(missing_ok=True)
    run_id = _trigger(api, {"table": tables["keyed"]})
    with af.unpaused(api, DAG_ID):
        run, tis = af.wait_for_run(api, DAG_ID, run_id, RUN_TIMEOUT)
    logs = af.task_logs(api, DAG_ID, run_id, tis)
    assert run["state"] == "success", af.tasks_report(tis, logs)
    # Equal, or skipped before the stream's first batch: a difference fails the run.
    assert af.task_states(tis)["reconcile"] in ("success", "skipped"), af.tasks_report(tis, logs)
    status = connector_status(cdc)
    assert status is not None and status.running, status
    assert tables["keyed"] in captured_tables(cdc)
    assert supervisor.status().running, supervisor.status().describe()
    # The incremental snapshot put the table's three rows into its topic.
    rows = _snapshot_rows(supervisor.settings, cdc.topic(tables["keyed"]))
    assert sorted(r["cart_id"] for r in rows) == ["c1", "c2", "c3"], rows


def _trigger(api: af.Api, conf: dict[str, Any]) -> str:
    # First in line: it goes before the scheduled run unpausing creates.
    run = af.trigger_run(api, DAG_ID, conf, run_after=af.BEFORE_SCHEDULED_RUNS)
    return str(run["dag_run_id"])


def _snapshot_rows(settings: Settings, topic: str) -> list[dict[str, Any]]:
    """The row images in the topic (the snapshot's reads), once it holds three records."""
    from lakehouse.core.kafka_offsets import end_offsets

    af.wait_until(
        lambda: sum(end_offsets(settings, topic).values()) >= 3, 120, f"3 records in {topic}"
    )
    consumer = KafkaConsumer(
        bootstrap_servers=settings.kafka.bootstrap_servers,
        enable_auto_commit=False,
        consumer_timeout_ms=20_000,
    )
    try:
        consumer.assign([TopicPartition(topic, 0)])
        consumer.seek_to_beginning()
        values = [json.loads(r.value) for r in consumer if r.value is not None]
        return [v["after"] for v in values if v.get("after")]
    finally:
        consumer.close()
