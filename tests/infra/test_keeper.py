"""The keeper (infra/services/keeper.py) with small Python processes in its place."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from infra.services.keeper import MARK, kept
from lakehouse.core.paths import REPO_ROOT


def keeper(command: list[str], log: Path, min_uptime: float) -> subprocess.Popen[bytes]:
    argv = kept(command)
    argv[3:3] = ["--min-uptime", str(min_uptime), "--delay", "0.1"]
    with open(log, "wb") as out:
        return subprocess.Popen(
            argv, cwd=REPO_ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )


def starts(tmp_path: Path, lives: float, status: int) -> list[str]:
    """A process that notes its start in a file, lives `lives` seconds and exits `status`."""
    code = (
        f"import time; open({str(tmp_path / 'starts')!r}, 'a').write('x\\n'); "
        f"time.sleep({lives}); raise SystemExit({status})"
    )
    return [sys.executable, "-c", code]


def started(tmp_path: Path) -> int:
    found = tmp_path / "starts"
    return len(found.read_text().splitlines()) if found.exists() else 0


def wait(check: Callable[[], bool], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_a_process_that_exits_is_started_again_until_the_group_is_stopped(tmp_path: Path) -> None:
    log = tmp_path / "log"
    proc = keeper(starts(tmp_path, 0.5, 3), log, min_uptime=0.2)
    wait(lambda: started(tmp_path) >= 3)
    os.killpg(proc.pid, signal.SIGTERM)
    assert proc.wait(timeout=30) == 128 + signal.SIGTERM  # the process's, killed by the signal
    count = started(tmp_path)
    time.sleep(1)
    assert started(tmp_path) == count, "started again after the stop"
    lines = [line for line in log.read_text().splitlines() if line.startswith(MARK)]
    assert len(lines) >= 2 and "exited with status 3 after" in lines[0], lines
    assert lines[0].endswith("starting it again"), lines


def test_a_stop_while_the_process_runs_waits_for_it_and_starts_nothing(tmp_path: Path) -> None:
    proc = keeper(starts(tmp_path, 60, 0), tmp_path / "log", min_uptime=0.2)
    wait(lambda: started(tmp_path) == 1)
    os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(timeout=30)
    assert started(tmp_path) == 1
    assert MARK not in (tmp_path / "log").read_text()


def test_a_process_that_exits_right_after_its_start_is_not_restarted(tmp_path: Path) -> None:
    log = tmp_path / "log"
    proc = keeper(starts(tmp_path, 0, 4), log, min_uptime=30)
    assert proc.wait(timeout=30) == 4
    assert started(tmp_path) == 1
    assert "exited with status 4 0 s after its start: not restarted" in log.read_text()


def test_no_command_is_a_usage_error() -> None:
    done = subprocess.run(kept([]), cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "give the command to keep running" in done.stderr
