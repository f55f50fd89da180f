"""A service's leftover processes are found by the environment they inherited, and stopped
(lakehouse/core/processes.py): real processes, detached the way a running Airflow task is."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid

from lakehouse.core.processes import _alive, processes_with_env, stop_processes

# A parent that starts a child in a session of its own (as a task starts its job), then waits.
TREE = (
    "import subprocess, sys, time\n"
    "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'],"
    " start_new_session=True)\n"
    "time.sleep(60)\n"
)
# One that ignores SIGTERM, as a JVM busy in a shutdown hook may seem to.
STUBBORN = "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(60)\n"


def found_within(name: str, value: str, count: int) -> list[int]:
    deadline = time.monotonic() + 10
    while len(pids := processes_with_env(name, value)) < count and time.monotonic() < deadline:
        time.sleep(0.1)
    return pids


def test_detached_processes_are_found_by_their_environment_and_stopped() -> None:
    marker = uuid.uuid4().hex
    ours = {**os.environ, "TRIBUTARY_TEST_HOME": marker}
    other = {**os.environ, "TRIBUTARY_TEST_HOME": marker + "-other"}
    tree = subprocess.Popen([sys.executable, "-c", TREE], env=ours, start_new_session=True)
    bystander = subprocess.Popen([sys.executable, "-c", STUBBORN], env=other)
    try:
        pids = found_within("TRIBUTARY_TEST_HOME", marker, 2)
        assert len(pids) == 2 and tree.pid in pids, pids
        assert bystander.pid not in pids
        stop_processes(pids)
        tree.wait(timeout=5)
        assert not any(_alive(pid) for pid in pids)
        assert processes_with_env("TRIBUTARY_TEST_HOME", marker) == []
        assert bystander.poll() is None, "a process of another home is left alone"
    finally:
        for proc in (tree, bystander):
            proc.kill()
            proc.wait()


def test_a_process_that_ignores_sigterm_is_killed_after_the_timeout() -> None:
    marker = uuid.uuid4().hex
    env = {**os.environ, "TRIBUTARY_TEST_HOME": marker}
    stubborn = subprocess.Popen([sys.executable, "-c", STUBBORN], env=env)
    try:
        [pid] = found_within("TRIBUTARY_TEST_HOME", marker, 1)
        time.sleep(0.5)  # its handler in place
        stop_processes([pid], timeout=1)
        assert stubborn.wait(timeout=5) == -9
    finally:
        stubborn.kill()
        stubborn.wait()


# A leader that ends on SIGTERM, leaving a child in its group that ignores it.
LEADER = (
    "import subprocess, sys, time\n"
    "subprocess.Popen([sys.executable, '-c', "
    "'import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)'])\n"
    "time.sleep(60)\n"
)


def test_stopping_a_service_ends_what_its_leader_left_in_the_group(tmp_path) -> None:
    from lakehouse.core.processes import Proc

    marker = uuid.uuid4().hex
    proc = Proc("leader", tmp_path)
    proc.start([sys.executable, "-c", LEADER], {**os.environ, "TRIBUTARY_TEST_HOME": marker})
    try:
        pids = found_within("TRIBUTARY_TEST_HOME", marker, 2)
        assert len(pids) == 2, pids
        time.sleep(0.5)  # the child's handler in place
        assert proc.stop(timeout=5)
        time.sleep(0.5)
        assert [pid for pid in pids if _alive(pid)] == []
    finally:
        stop_processes(processes_with_env("TRIBUTARY_TEST_HOME", marker), timeout=1)
