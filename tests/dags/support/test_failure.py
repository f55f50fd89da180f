"""dags.support.failure: a refusal is never retried, a failure follows the task's retries, and
each is a SystemExit whose exit code is the reason (what Airflow logs as the task's ERROR line,
with no stack trace). Here, not in tests/unit: it imports Airflow."""

from __future__ import annotations

from pathlib import Path


def test_a_refusal_fails_at_once_and_a_failure_is_retried_as_the_dag_says(
    airflow_home: Path,
) -> None:
    from airflow.sdk.definitions.retry_policy import RetryAction

    from dags.support.failure import Refused, TaskFailed, retry_policy

    policy = retry_policy()
    refused = policy.evaluate(Refused("bad interval"), try_number=1, max_tries=3)
    assert refused.action is RetryAction.FAIL
    failed = policy.evaluate(TaskFailed("the job crashed"), try_number=1, max_tries=3)
    assert failed.action is RetryAction.DEFAULT
    assert policy.evaluate(RuntimeError("x"), try_number=1, max_tries=3).action is (
        RetryAction.DEFAULT
    )
    for end in (Refused("bad interval"), TaskFailed("the job crashed")):
        assert isinstance(end, SystemExit) and end.code == str(end)


def test_the_dags_with_retries_carry_the_policy(airflow_home: Path) -> None:
    from dags.support.failure import Refused
    from tests.dags.conftest import load_dag_file

    for name in ("batch_layer", "data_quality", "reconcile"):
        dag = load_dag_file(name).dag
        for t in dag.tasks:
            assert t.retries > 0, (name, t.task_id)
            decision = t.retry_policy.evaluate(Refused("no"), try_number=1, max_tries=3)
            assert decision.action.value == "fail", (name, t.task_id)
