"""A run's parameters: a name its DAG does not declare is named, with the one meant.
(checked_params, which needs Airflow, is tested in tests/dags.)"""

from __future__ import annotations

from dags.support.run_params import unknown_params_message


def test_declared_names_pass() -> None:
    assert unknown_params_message({"action": "stop"}, {"action": "ensure"}) is None
    assert unknown_params_message({}, {"action": "ensure"}) is None


def test_a_misspelt_name_is_named_with_the_one_meant() -> None:
    message = unknown_params_message({"actoin": "stop"}, ["action"])
    assert message == (
        "unknown parameter 'actoin' (did you mean 'action'?): this DAG takes action; "
        "nothing was done"
    )


def test_several_unknown_names_and_a_dag_without_parameters() -> None:
    message = unknown_params_message(["zzz", "strat"], ["start", "end"])
    assert message is not None
    assert message.startswith("unknown parameters 'strat' (did you mean 'start'?), 'zzz':")
    assert unknown_params_message(["x"], []) == (
        "unknown parameter 'x': this DAG takes none; nothing was done"
    )
