"""dags.support.run_params.checked_params as a DAG task calls it: an unknown name fails the task
without retries. Here, not in tests/unit: it imports Airflow, which must come after the
airflow_home fixture."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest


def context(conf: dict[str, object] | None) -> dict[str, object]:
    return {
        "dag": SimpleNamespace(params={"action": "ensure"}),
        "dag_run": SimpleNamespace(conf=conf),
        "params": {"action": "ensure", **(conf or {})},
    }


def test_checked_params_fails_the_task_without_retries(airflow_home: Path) -> None:
    from dags.support.failure import Refused
    from dags.support.run_params import checked_params

    with pytest.raises(Refused, match="did you mean 'action'"):
        checked_params(context({"actoin": "stop"}))
    assert checked_params(context({"action": "stop"}))["action"] == "stop"
    assert checked_params(context(None))["action"] == "ensure"  # a scheduled run: no conf
