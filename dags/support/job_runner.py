"""Run a Spark job (a module under jobs/) as a child process, its output line by line.

Airflow tasks use this instead of starting Spark inside the worker: the JVM's memory goes
back when the job ends, and a task that is stopped takes its job down with it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from jobs.contract import Exit, describe, read_result
from lakehouse.core.paths import REPO_ROOT

from .failure import Refused, TaskFailed


@dataclass(frozen=True)
class JobOutcome:
    returncode: int
    lines: list[str]

    def reason(self) -> str:
        """Why a job refused or failed: its last line (a job ends with its reason)."""
        said = [line.strip() for line in self.lines if line.strip()]
        return said[-1] if said else f"it printed nothing (status {describe(self.returncode)})"

    def refusal(self, what: str) -> Refused:
        """The task's end for a refused job: `what`, then the job's reason; not retried."""
        return Refused(f"{what}: {self.reason()}")

    def failure(self, job: str) -> TaskFailed:
        """The task's end for a job that failed: its status and its reason; retried as the
        DAG says."""
        return TaskFailed(f"{job} stopped with status {describe(self.returncode)}: {self.reason()}")

    def last(self, prefix: str) -> str | None:
        """The text after `prefix` on the last line that starts with it."""
        found = [line[len(prefix) :] for line in self.lines if line.startswith(prefix)]
        return found[-1] if found else None

    def summary(self, job: str, succeeded: tuple[Exit, ...] = (Exit.OK,)) -> dict[str, Any]:
        """The result `job` printed last (jobs.contract), once it ended with one of the
        `succeeded` statuses; any other status fails the task (the job's log says why)."""
        if self.returncode not in succeeded:
            raise self.failure(job)
        found = read_result(job, self.lines)
        if found is None:
            raise TaskFailed(f"{job} ended with status {self.returncode} but printed no result")
        return found


class RunJob(Protocol):
    """What a task calls to run a job: run_job below, or (tests) the job in-process."""

    def __call__(
        self,
        module: str,
        args: list[str],
        on_line: Callable[[str], None],
        extra_env: dict[str, str] | None = None,
    ) -> JobOutcome: ...


def run_job(
    module: str,
    args: list[str],
    on_line: Callable[[str], None],
    extra_env: dict[str, str] | None = None,
) -> JobOutcome:
    env = {**os.environ, **(extra_env or {})}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    env["PYTHONUNBUFFERED"] = "1"
    lines: list[str] = []
    proc = subprocess.Popen(
        [sys.executable, "-m", module, *args],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert proc.stdout is not None
        for raw in proc.stdout:
            line = raw.rstrip("\n")
            lines.append(line)
            on_line(line)
        return JobOutcome(proc.wait(), lines)
    finally:
        if proc.poll() is None:  # the task was stopped (timeout, mark-failed): stop the job
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
