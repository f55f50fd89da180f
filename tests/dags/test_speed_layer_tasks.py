"""The speed_layer DAG's tasks, run here on a state folder of the test's own (pid, stop and
hold files; no stream is started): a misspelt parameter fails the run before the supervisor
acts; a stop holds the stream down, so a scheduled `ensure` leaves it stopped and the health
check is skipped. tests/integration/test_speed_layer_dag.py starts, kills and stops the real
stream."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from lakehouse.core.config import get_settings
from lakehouse.core.paths import STATE_ENV
from lakehouse.speed.supervisor import SpeedLayerSupervisor
from tests.dags.conftest import DagFile, load_dag_file


@pytest.fixture(scope="module")
def speed(airflow_home: Path) -> DagFile:
    return load_dag_file("speed_layer")


@pytest.fixture
def supervisor(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[SpeedLayerSupervisor]:
    monkeypatch.setenv(STATE_ENV, str(tmp_path / "state"))
    get_settings.cache_clear()
    yield SpeedLayerSupervisor(get_settings())
    monkeypatch.undo()
    get_settings.cache_clear()


def _files(supervisor: SpeedLayerSupervisor) -> dict[str, bool]:
    watched = (supervisor.proc.pid_file, supervisor.hold_file, supervisor.stop_file)
    return {p.name: p.exists() for p in watched}


def test_a_misspelt_parameter_fails_the_run_and_changes_nothing(
    speed: DagFile, supervisor: SpeedLayerSupervisor
) -> None:
    """`{"actoin": "stop"}` would otherwise run the default action, ensure (a start)."""
    from dags.support.failure import Refused

    before = _files(supervisor)
    context = speed.context("supervise", {"actoin": "stop"})
    with pytest.raises(Refused) as refused:
        speed.module.apply_action(context)
    assert type(refused.value) is Refused
    assert "unknown parameter 'actoin' (did you mean 'action'?)" in str(refused.value)
    assert _files(supervisor) == before and not supervisor.status().running


def test_a_stop_holds_the_stream_down_and_skips_the_health_check(
    speed: DagFile, supervisor: SpeedLayerSupervisor
) -> None:
    from airflow.sdk.exceptions import AirflowSkipException

    done = speed.module.apply_action(speed.context("supervise", {"action": "stop"}))
    assert not done["running"] and "stays stopped until a run" in done["outcome"], done
    with pytest.raises(AirflowSkipException, match="nothing to check"):
        speed.module.assess_stream(done)
    assert supervisor.held()
    # A scheduled run (no conf: the default action, ensure) leaves it stopped.
    again = speed.module.apply_action(speed.context("supervise", None, run_type="scheduled"))
    assert not again["running"] and "not starting the speed layer" in again["outcome"], again
    assert not supervisor.status().running
