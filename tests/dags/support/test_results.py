"""dags.support.results: a task's Results link points into the Tributary view, which serves
the state folder's dq/; a dry run's plan is kept there as a page of its own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dags.support.results import RESULTS_KEY, link_results, results_url, save_plan
from lakehouse.core.paths import STATE_ENV


class PushingTask:
    """What a task's `ti` does with xcom_push, recorded."""

    def __init__(self) -> None:
        self.pushed: dict[str, Any] = {}

    def xcom_push(self, key: str, value: Any) -> None:
        self.pushed[key] = value


def test_a_file_under_dq_gets_the_views_url_and_anything_else_the_view(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(STATE_ENV, str(tmp_path / "state"))
    report = tmp_path / "state" / "dq" / "reports" / "manual__1.html"
    assert results_url(report) == "/tributary/dq/reports/manual__1.html"
    escaped = tmp_path / "state" / "dq" / ".." / "secrets.env"
    assert results_url(escaped) == "/tributary/"
    assert results_url(tmp_path / "elsewhere" / "index.html") == "/tributary/"


def test_a_plan_is_saved_and_linked_from_the_task(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(STATE_ENV, str(tmp_path / "state"))
    ti = PushingTask()
    context = {"run_id": "manual__2026-11-29T09:00:00+00:00", "ti": ti}
    url = save_plan(context, ["replay of 'events' from earliest:", "  1500 records"])
    link_results(context, "the plan", url)
    assert url == "/tributary/dq/plans/manual__2026-11-29T09_00_00_00_00.txt"
    saved = tmp_path / "state" / "dq" / url.removeprefix("/tributary/dq/")
    assert saved.read_text() == "replay of 'events' from earliest:\n  1500 records\n"
    assert ti.pushed == {RESULTS_KEY: url}
    link_results({"run_id": "x"}, "no task instance here", url)  # in-process tests: no ti
