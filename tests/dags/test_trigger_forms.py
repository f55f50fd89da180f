"""The trigger forms' version fields offer the replay versions that exist (the other form
rules are checked over every DAG in test_dag_integrity)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from lakehouse.core.config import get_settings
from lakehouse.core.tables import table
from tests.dags.conftest import load_dag_file


def _write(path: str, rows: list[dict[str, Any]]) -> None:
    import pyarrow as pa
    from deltalake import write_deltalake

    write_deltalake(path, pa.Table.from_pylist(rows), mode="append")


def test_the_version_fields_offer_the_versions_the_lakehouse_holds(
    airflow_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRIBUTARY__STORAGE__ROOT", str(tmp_path / "lakehouse"))
    get_settings.cache_clear()
    try:
        settings = get_settings()
        for dag_id, field in (("promote_version", "version"), ("kappa_replay", "extend")):
            param = load_dag_file(dag_id).dag.params.get_param(field)
            assert "examples" not in param.schema and "no version exists yet" in param.description

        t0 = datetime(2026, 1, 1, tzinfo=UTC)
        events = [("v1", 0), ("v2", 1), ("v3", 2), ("v1", 3)]  # v1 extended last
        _write(
            table("ops.replay_versions").path(settings),
            [
                {"version": v, "event": "caught_up", "at": t0 + timedelta(hours=h)}
                for v, h in events
            ],
        )
        _write(
            table("ops.serving_pointer").path(settings),
            [{"version": "v3", "action": "remove", "at": t0 + timedelta(hours=4)}],
        )
        for dag_id, field in (("promote_version", "version"), ("kappa_replay", "extend")):
            param = load_dag_file(dag_id).dag.params.get_param(field)
            assert param.schema["examples"] == ["v1", "v2"], "newest first, not the removed v3"
            assert "existing: v1, v2" in param.description
        sides = load_dag_file("reconcile").dag.params.get_param("left").schema["examples"]
        assert sides == ["batch", "speed", "replay:v1", "replay:v2"]
    finally:
        get_settings.cache_clear()
