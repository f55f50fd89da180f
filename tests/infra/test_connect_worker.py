"""Kafka Connect's worker config: its group and internal topics come from the settings, and a
default install keeps the names it always had (its connectors and offsets live there)."""

from __future__ import annotations

import os
from pathlib import Path

from infra.services.base import Context
from infra.services.connect import Connect
from lakehouse.core.config import load_settings


def worker_properties(tmp_path: Path, **services: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRIBUTARY__SERVICES__")}
    env["TRIBUTARY_STATE"] = str(tmp_path / "state")
    env.update({f"TRIBUTARY__SERVICES__{k.upper()}": v for k, v in services.items()})
    settings = load_settings(profile="local", environ=env)
    path = Connect(Context(settings=settings, state=tmp_path / "state"))._write_properties()
    lines = Path(path).read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))


def test_a_default_worker_keeps_its_group_and_internal_topics(tmp_path: Path) -> None:
    props = worker_properties(tmp_path)
    assert props["group.id"] == "tributary-connect"
    assert props["config.storage.topic"] == "connect-configs"
    assert props["offset.storage.topic"] == "connect-offsets"
    assert props["status.storage.topic"] == "connect-status"
    assert props["listeners"] == "http://127.0.0.1:8083"


def test_a_worker_of_its_own_has_its_own_group_and_internal_topics(tmp_path: Path) -> None:
    props = worker_properties(
        tmp_path,
        connect_port="18999",
        connect_group_id="faults-connect",
        connect_storage_topic_prefix="faults-connect",
    )
    assert props["group.id"] == "faults-connect"
    assert props["config.storage.topic"] == "faults-connect-configs"
    assert props["offset.storage.topic"] == "faults-connect-offsets"
    assert props["status.storage.topic"] == "faults-connect-status"
    assert props["listeners"] == "http://127.0.0.1:18999"
