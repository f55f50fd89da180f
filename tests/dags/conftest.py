"""Airflow for DAG tests: a throwaway AIRFLOW_HOME, so parsing DAGs here never reads or writes
the running Airflow's configuration or metadata database. And a DAG's tasks run here, in this
process: their logic (the DAG file's module functions) called with the context Airflow would
give them, the jobs they run called in-process on a lakehouse of the test's own."""

from __future__ import annotations

import copy
import importlib.util
import sys
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import pytest

from dags.support.job_runner import JobOutcome
from lakehouse.core.paths import REPO_ROOT, STATE_ENV
from tests.jobs_in_process import RunJob as RunJobHere

if TYPE_CHECKING:
    from dags.support.job_runner import RunJob

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


@dataclass(frozen=True)
class DagFile:
    """A DAG file twice: as a module (its tasks' logic, to call) and as the DAG Airflow
    parses from it (its parameters and tasks)."""

    module: Any
    dag: Any

    def context(
        self, task_id: str, conf: dict[str, Any] | None = None, run_type: str = "manual"
    ) -> dict[str, Any]:
        """What Airflow's task runner gives `task_id` in a run triggered with `conf`: the
        parameters merged and validated by Airflow's own process_params, the run, and the
        accessors the task sets its asset events' extras on."""
        from airflow.sdk.definitions.param import process_params
        from airflow.sdk.execution_time.context import OutletEventAccessors

        task = self.dag.get_task(task_id)
        run_id = f"{run_type}__test_{uuid.uuid4().hex[:12]}"
        # Copies: resolving a run's values sets them on the Param objects it is given.
        declared = SimpleNamespace(params=copy.deepcopy(self.dag.params))
        own = SimpleNamespace(params=copy.deepcopy(task.params))
        return {
            "dag": self.dag,
            "task": task,
            "params": process_params(declared, own, conf, suppress_exception=False),  # type: ignore[arg-type]
            "dag_run": SimpleNamespace(conf=conf, run_type=run_type, run_id=run_id),
            "run_id": run_id,
            "outlet_events": OutletEventAccessors(),
        }


def load_dag_file(name: str) -> DagFile:
    """dags/<name>.py as a module and as its DAG (needs the airflow_home fixture)."""
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=DAGS_FOLDER / f"{name}.py", safe_mode=False)
    assert not bag.import_errors, bag.import_errors
    return DagFile(load_dag_module(name), bag.dags[name])


@pytest.fixture
def jobs_here(run_job_here: RunJobHere, tmp_path: Path) -> RunJob:
    """What a task calls to run a job (dags.support.job_runner.RunJob), running it in this
    process instead of a child one, on a lakehouse and a state folder (locks, logs) of the
    test's own, empty at first: the job's own main(argv), its printed lines fed to the task's
    log as they would be."""
    lakehouse = {
        STATE_ENV: str(tmp_path / "state"),
        "TRIBUTARY__STORAGE__ROOT": str(tmp_path / "lakehouse"),
        "TRIBUTARY__STORAGE__CHECKPOINTS": str(tmp_path / "checkpoints"),
    }

    def run(
        module: str,
        args: list[str],
        on_line: Callable[[str], None],
        extra_env: dict[str, str] | None = None,
    ) -> JobOutcome:
        ran = run_job_here(module, *args, **lakehouse, **(extra_env or {}))
        # A child process's stderr goes to the same pipe; here it follows stdout.
        lines = [*ran.stdout.splitlines(), *ran.stderr.splitlines()]
        for line in lines:
            on_line(line)
        return JobOutcome(ran.returncode, lines)

    return run


def no_job(module: str, args: list[str], *_: Any, **__: Any) -> JobOutcome:
    """For a task that must decide without running any job."""
    raise AssertionError(f"the task ran {module} {' '.join(args)}")
