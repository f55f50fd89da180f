"""Running a job as a child process and reading what it printed, as the DAGs' tasks do."""

from __future__ import annotations

import pytest

from dags.support.failure import TaskFailed
from dags.support.job_runner import JobOutcome, run_job
from jobs.contract import Exit


def test_the_last_result_line_is_the_summary_and_its_lines_reach_the_log() -> None:
    seen: list[str] = []
    # Any module the interpreter has will do: a real child process, its output line by line.
    outcome = run_job("json.tool", ["--help"], seen.append)
    assert outcome.returncode == 0 and seen == outcome.lines and seen

    printed = JobOutcome(0, ["==> working", 'x result: {"n": 1}', "note", 'x result: {"n": 2}'])
    assert printed.summary("x") == {"n": 2}


def test_a_failed_status_or_a_missing_result_fails_with_the_job_s_name_and_reason() -> None:
    stopped = r"x stopped with status 3 \(nothing to do\): the topic is empty$"
    with pytest.raises(TaskFailed, match=stopped):
        JobOutcome(3, ['x result: {"n": 1}', "the topic is empty", ""]).summary("x")
    accepted = (Exit.OK, Exit.CHECKS_FAILED)
    assert JobOutcome(4, ['x result: {"n": 1}']).summary("x", accepted) == {"n": 1}
    with pytest.raises(TaskFailed, match=r"x ended with status 0 but printed no result"):
        JobOutcome(0, ["==> done", 'y result: {"n": 1}']).summary("x")
