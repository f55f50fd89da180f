"""The trigger forms as Airflow renders them from the DAGs' params: no regular expression for
a person to decode, no bare "null" choice, and the replay versions that exist offered in the
version fields."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from lakehouse.core.config import get_settings
from lakehouse.core.tables import table
from tests.dags.conftest import DAGS_FOLDER, load_dag_file

if TYPE_CHECKING:
    from collections.abc import Iterator


def _schemas() -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path in sorted(DAGS_FOLDER.glob("*.py")):
        dag = load_dag_file(path.stem).dag
        for name in dag.params:
            yield dag.dag_id, name, dict(dag.params.get_param(name).schema)


def test_no_field_asks_for_a_regex_or_offers_a_bare_null(airflow_home: Path) -> None:
    for dag_id, name, schema in _schemas():
        assert "pattern" not in schema, f"{dag_id}.{name}: a regex the form would show"
        if None in schema.get("enum", []):
            labels = schema.get("values_display") or {}
            assert None in labels, f"{dag_id}.{name}: an empty choice shown as 'null'"


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
