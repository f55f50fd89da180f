"""Links from a task to what it produced (a reconciliation report, the Data Docs, a replay's
plan), shown as the task's "Results" button in the Airflow UI.

The task pushes the link's URL as an XCom under RESULTS_KEY; the Tributary plugin declares
the global extra link that reads it (plugins/tributary_links.py). The URLs point into the
Tributary view, which serves the state folder's dq/ behind Airflow's login.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

RESULTS_KEY = "tributary_results"
VIEW_URL = "/tributary/"
DQ_URL = f"{VIEW_URL}dq/"

log = logging.getLogger("tributary.dags.results")


def _dq_root() -> Path:
    from lakehouse.core.paths import dq_dir

    return dq_dir().resolve()


def results_url(path: str | Path) -> str:
    """The view's URL of a file under the state folder's dq/; the view itself for any other
    file (it cannot serve it)."""
    root, wanted = _dq_root(), Path(path).resolve()
    if not wanted.is_relative_to(root):
        return VIEW_URL
    return DQ_URL + wanted.relative_to(root).as_posix()


def link_results(context: Mapping[str, Any], what: str, url: str) -> None:
    """Make `url` the run's Results link for this task, and say so in its log."""
    log.info("Results (%s): %s", what, url)
    ti = context.get("ti")
    if ti is not None:
        ti.xcom_push(key=RESULTS_KEY, value=url)


def save_plan(context: Mapping[str, Any], lines: list[str]) -> str:
    """A dry run's plan, as its job printed it, kept as a page of its own; its URL."""
    from lakehouse.core.paths import run_file_name

    path = _dq_root() / "plans" / f"{run_file_name(str(context['run_id']))}.txt"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return results_url(path)
