"""The one exit contract: a meaning per status, one result-line format, every job on it, and
readable by a DAG without pyspark."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from jobs.contract import Exit, describe, read_result, result_line

REPO = Path(__file__).parents[3]
JOBS = sorted(p for p in (REPO / "jobs").glob("*.py") if p.stem not in ("__init__", "contract"))


def test_every_status_has_one_meaning_and_argparse_s_is_a_bad_request() -> None:
    assert len({int(status) for status in Exit}) == len(Exit)
    assert Exit.BAD_REQUEST == 2  # argparse exits with 2 on a bad command line
    assert describe(5) == "5 (failed)"
    assert "not a status" in describe(-9)


def test_a_result_line_round_trips_and_the_last_one_wins() -> None:
    lines = [result_line("batch", {"rows": 1}), "noise", result_line("batch", {"rows": 2})]
    assert read_result("batch", lines) == {"rows": 2}
    assert read_result("replay", lines) is None


def test_no_job_defines_exit_statuses_or_result_prefixes_of_its_own() -> None:
    """Statuses come from Exit, result lines from result_line: a job returning a bare number
    or defining its own EXIT_ or RESULT_ constant would be a second contract."""
    problems = []
    for path in JOBS:
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            value = (
                node.value.value
                if isinstance(node, ast.Return) and isinstance(node.value, ast.Constant)
                else None
            )
            if isinstance(value, int) and not isinstance(value, bool):
                problems.append(f"{path.name}:{node.lineno} returns {value}")
            if isinstance(node, ast.Name) and node.id.startswith(("EXIT_", "RESULT_PREFIX")):
                problems.append(f"{path.name}:{node.lineno} uses {node.id}")
    assert not problems, "jobs must use jobs.contract: " + "; ".join(problems)


def test_reading_the_contract_imports_no_pyspark() -> None:
    code = "import sys, jobs.contract, dags.support.job_runner; print('pyspark' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "False"


def test_a_job_exits_with_its_status_and_its_output_flushed() -> None:
    """exit_with skips Python's teardown (native thread pools can abort it after the work is
    done) but not the job's last lines: they are flushed first, logging included."""
    import subprocess
    import sys

    from lakehouse.core.paths import REPO_ROOT

    code = (
        "import logging, sys; from jobs.contract import exit_with; "
        "logging.basicConfig(stream=sys.stderr); print('result line', end=''); "
        "logging.getLogger('t').warning('logged'); exit_with(4)"
    )
    ran = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60
    )
    assert ran.returncode == 4
    assert ran.stdout == "result line" and "logged" in ran.stderr
