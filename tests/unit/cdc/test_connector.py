"""The Debezium connector's config as built from the settings, and the refusal of a table that
cannot be captured (pure: no Connect, no PostgreSQL)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lakehouse.cdc.connector import (
    PASSWORD_REFERENCE,
    CdcError,
    ConnectorStatus,
    TaskState,
    connector_config,
    primary_key_problems,
)
from lakehouse.core.config import CdcSettings, load_settings


@pytest.fixture
def cdc(tmp_path: Path) -> CdcSettings:
    return load_settings(environ={"TRIBUTARY_CACHE": str(tmp_path / "cache")}).cdc


def test_the_config_captures_each_table_into_a_compacted_topic_keyed_by_its_primary_key(
    cdc: CdcSettings,
) -> None:
    config = connector_config(cdc)
    assert config["connector.class"] == "io.debezium.connector.postgresql.PostgresConnector"
    assert config["plugin.name"] == "pgoutput"
    assert config["topic.prefix"] == "shop"
    assert config["table.include.list"] == r"public\.users,public\.products,public\.orders"
    assert config["publication.autocreate.mode"] == "filtered"
    assert config["slot.name"] == cdc.slot_name
    assert config["decimal.handling.mode"] == "string"
    assert config["tombstones.on.delete"] == "true"
    assert config["snapshot.mode"] == "initial"
    assert config["topic.creation.default.cleanup.policy"] == "compact"
    assert config["topic.creation.default.replication.factor"] == "1"
    assert config["topic.creation.default.partitions"] == "1"
    assert [cdc.topic(t) for t in cdc.tables] == [
        "shop.public.users",
        "shop.public.products",
        "shop.public.orders",
    ]


def test_the_config_names_the_password_and_never_holds_it(cdc: CdcSettings) -> None:
    secret = cdc.model_copy(update={"password": "s3cret-value"})
    config = connector_config(secret)
    assert config["database.password"] == PASSWORD_REFERENCE == "${env:TRIBUTARY_POSTGRES_PASSWORD}"
    assert "s3cret-value" not in str(config)


def test_the_database_address_follows_the_settings(tmp_path: Path) -> None:
    env = {
        "TRIBUTARY_CACHE": str(tmp_path / "cache"),
        "TRIBUTARY__CDC__DATABASE_HOST": "db.internal",
        "TRIBUTARY__CDC__DATABASE_PORT": "6543",
    }
    config = connector_config(load_settings(environ=env).cdc)
    assert (config["database.hostname"], config["database.port"]) == ("db.internal", "6543")


def test_topic_settings_are_added_but_cannot_turn_compaction_off(cdc: CdcSettings) -> None:
    config = connector_config(cdc, {"segment.ms": "100", "cleanup.policy": "compact"})
    assert config["topic.creation.default.segment.ms"] == "100"
    assert config["topic.creation.default.cleanup.policy"] == "compact"
    with pytest.raises(CdcError, match="must be compacted"):
        connector_config(cdc, {"cleanup.policy": "delete"})


def test_a_table_without_a_primary_key_is_refused_with_what_to_do(cdc: CdcSettings) -> None:
    found = {"users": (True, True), "products": (True, False), "orders": (True, True)}
    problems = primary_key_problems(cdc, found)
    assert problems == [
        "table public.products has no primary key, so its changes cannot be captured: each "
        "change is keyed by the primary key and the changelog topic keeps the latest change "
        "per key; add one (ALTER TABLE public.products ADD PRIMARY KEY (...)) or take it out "
        "of cdc.tables"
    ]


def test_a_missing_table_is_refused_too(cdc: CdcSettings) -> None:
    problems = primary_key_problems(cdc, {"users": (True, True), "orders": (True, True)})
    assert problems == [
        "table public.products does not exist in database shop; create it or take it out of "
        "cdc.tables"
    ]
    assert primary_key_problems(cdc, dict.fromkeys(cdc.tables, (True, True))) == []


def test_running_means_the_connector_and_every_task() -> None:
    def status(connector: str, *tasks: str) -> ConnectorStatus:
        states = tuple(TaskState(id=i, state=s, trace=None) for i, s in enumerate(tasks))
        return ConnectorStatus(name="c", state=connector, tasks=states)

    assert status("RUNNING", "RUNNING").running
    assert not status("RUNNING").running  # no task yet
    assert not status("RUNNING", "FAILED").running
    assert not status("PAUSED", "RUNNING").running
