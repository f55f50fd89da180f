"""Run a Spark job (a module under jobs/) as a child process, its output line by line.

Airflow tasks use this instead of starting Spark inside the worker: the JVM's memory goes
back when the job ends, and a task that is stopped takes its job down with it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lakehouse.core.paths import REPO_ROOT


@dataclass(frozen=True)
class JobOutcome:
    returncode: int
    lines: list[str]

    def last(self, prefix: str) -> str | None:
        """The text after `prefix` on the last line that starts with it."""
        found = [line[len(prefix) :] for line in self.lines if line.startswith(prefix)]
        return found[-1] if found else None

    def summary(self, job: str, prefix: str, succeeded: tuple[int, ...] = (0,)) -> dict[str, Any]:
        """The JSON result `job` printed last after `prefix`, once it ended with one of the
        `succeeded` statuses; any other status fails the task (the job's log says why)."""
        if self.returncode not in succeeded:
            raise RuntimeError(f"{job} stopped with status {self.returncode}: see the log above")
        text = self.last(prefix)
        if text is None:
            raise RuntimeError(f"{job} ended with status {self.returncode} but printed no result")
        found: dict[str, Any] = json.loads(text)
        return found


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
