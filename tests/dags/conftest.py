"""Airflow for DAG tests: a throwaway AIRFLOW_HOME, so parsing DAGs here never reads or writes
the running Airflow's configuration or metadata database."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from lakehouse.paths import REPO_ROOT

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
