"""Airflow for DAG tests: a throwaway AIRFLOW_HOME, so parsing DAGs here never reads or writes
the running Airflow's configuration or metadata database."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from lakehouse.core.paths import REPO_ROOT

DAGS_FOLDER = REPO_ROOT / "dags"


@pytest.fixture(scope="session")
def airflow_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    # Airflow reads its configuration once, when first imported; after that these variables
    # no longer matter, so an earlier import elsewhere would silently use the wrong home.
    if "airflow.configuration" in sys.modules:
        pytest.fail(
            "airflow was imported before the airflow_home fixture ran; import it "
            "inside tests or fixtures that depend on airflow_home"
        )
    home = tmp_path_factory.mktemp("airflow_home")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("AIRFLOW_HOME", str(home))
        env.setenv("AIRFLOW__CORE__UNIT_TEST_MODE", "True")
        env.setenv("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
        env.setenv("AIRFLOW__CORE__DAGS_FOLDER", str(DAGS_FOLDER))
        env.setenv("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", f"sqlite:///{home / 'airflow.db'}")
        yield home


def load_dag_module(name: str) -> Any:
    """A DAG file imported as a module, to call its helpers (needs the airflow_home fixture)."""
    spec = importlib.util.spec_from_file_location(f"dag_{name}", DAGS_FOLDER / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def triggering_events(*events: tuple[Any, dict[str, Any], str]) -> Any:
    """What the task runner gives a run as `triggering_asset_events`, built from
    (asset, extra, source run id) triples."""
    from airflow.sdk.execution_time.comms import AssetEventDagRunReferenceResult
    from airflow.sdk.execution_time.context import TriggeringAssetEventsAccessor

    return TriggeringAssetEventsAccessor.build(
        AssetEventDagRunReferenceResult(
            asset={"name": asset.name, "uri": asset.uri, "extra": {}},
            extra=extra,
            source_task_id="task",
            source_dag_id="dag",
            source_run_id=run_id,
            source_map_index=-1,
            source_aliases=[],
            timestamp=datetime.now(UTC),
        )
        for asset, extra, run_id in events
    )
