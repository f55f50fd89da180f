"""Start, stop and inspect a long-running stream as a detached process: the speed layer (what
the speed_layer DAG uses) and, through the same StreamSupervisor, the changelog stream
(lakehouse.cdc.supervisor, the cdc DAG).

The stream runs in its own session with a pid file, so it outlives whoever started it (an
Airflow task ends in seconds; the stream runs for weeks). Stopping asks first (the stop file
and SIGTERM let the current micro-batch finish) and kills only after a timeout.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from lakehouse.core.config import Settings
from lakehouse.core.paths import REPO_ROOT, speed_layer_stop_file, state_dir
from lakehouse.core.processes import Proc

if TYPE_CHECKING:
    from lakehouse.speed.progress import Health

# How long it waits on the stream (a start's check, a stop, the first micro-batch, a stale
# verdict's second look) is config: settings.supervisor.

Action = Literal["ensure", "start", "stop", "restart", "reset"]
ACTIONS: tuple[Action, ...] = ("ensure", "start", "stop", "restart")
# What a stream whose tables can be rebuilt from its inputs also takes: stopped, its job's
# --reset (tables and checkpoint removed), started again.
RESET: Action = "reset"


# A reset starts Spark to remove a few folders; a guard against a hang, not a schedule.
RESET_TIMEOUT_SECONDS = 600


class SupervisorError(Exception):
    """The stream cannot be started or stopped; the message says why and what to do."""


@dataclass(frozen=True)
class SupervisedStream:
    """Which job a supervisor runs: its module, the stop file the job watches by default, and
    the name of its pid, log, hold and lock files under the run folder."""

    name: str
    module: str
    stop_file: Path
    title: str  # as messages name it: "the speed layer"
    resettable: bool = False  # its job takes --reset


def speed_layer_stream() -> SupervisedStream:
    return SupervisedStream(
        "speed_layer", "jobs.speed_layer", speed_layer_stop_file(), "the speed layer"
    )


@dataclass(frozen=True)
class StreamStatus:
    running: bool
    pid: int | None
    started_at: datetime | None
    log_file: Path
    title: str = "the speed layer"

    @property
    def uptime_seconds(self) -> float | None:
        if self.started_at is None:
            return None
        return (datetime.now(UTC) - self.started_at).total_seconds()

    def describe(self) -> str:
        if not self.running:
            return f"{self.title} is not running (log: {self.log_file})"
        return (
            f"{self.title} is running: pid {self.pid}, up {self.uptime_seconds:.0f} s "
            f"(log: {self.log_file})"
        )


class StreamSupervisor:
    """Starts, stops and judges one stream job; `judge` says how healthy it is."""

    def __init__(
        self, settings: Settings, stream: SupervisedStream, run_dir: Path | None = None
    ) -> None:
        self.settings = settings
        self.stream = stream
        self.run_dir = run_dir or state_dir() / "run"
        self.proc = Proc(stream.name, self.run_dir)
        # The one the job watches: it is started without --stop-file.
        self.stop_file = stream.stop_file
        self.hold_file = self.run_dir / f"{stream.name}.held"

    def status(self) -> StreamStatus:
        pid = self.proc.pid()
        started = None
        if pid is not None:
            with contextlib.suppress(FileNotFoundError):
                # The pid file is written right after the spawn.
                started = datetime.fromtimestamp(self.proc.pid_file.stat().st_mtime, UTC)
        return StreamStatus(pid is not None, pid, started, self.proc.log_file, self.stream.title)

    def start(self) -> StreamStatus:
        """Start the stream; SupervisorError if it is running or dies within seconds."""
        with self._lock():
            return self._start()

    def stop(self, timeout: float | None = None) -> bool:
        """Stop gracefully, killing after `timeout` seconds (default: the config's). True if
        it was running."""
        with self._lock():
            return self._stop(timeout)

    def restart(self, timeout: float | None = None) -> StreamStatus:
        with self._lock():
            self._stop(timeout)
            return self._start()

    @property
    def actions(self) -> tuple[Action, ...]:
        return (*ACTIONS, RESET) if self.stream.resettable else ACTIONS

    def apply(self, action: Action) -> dict[str, Any]:
        """Do what the DAG's `action` asks; say what was done (JSON-able).

        A `stop` holds the stream down: scheduled `ensure` runs leave it stopped until a
        `start` or `restart`, otherwise the next run would undo the operator's stop."""
        if action not in self.actions:
            raise SupervisorError(
                f"unknown action {action!r} for {self.stream.title}; choose one of {self.actions}"
            )
        title = self.stream.title
        with self._lock():
            before = self.status()
            held = self.held()
            after: StreamStatus | None = None
            if action == "stop":
                self.hold_file.write_text(f"stopped on request at {_now()}\n")
                was = f"stopped {title} (pid {before.pid})"
                outcome = was if self._stop() else f"{title} was not running"
                outcome += "; it stays stopped until a run with action start or restart"
            elif action == "ensure" and before.running:
                after, outcome = before, f"nothing to do: {before.describe()}"
            elif action == "start" and before.running:
                # What was asked holds already (a scheduled ensure may have started it).
                self.hold_file.unlink(missing_ok=True)
                after, outcome = before, f"already running: {before.describe()}"
            elif action == "ensure" and held:
                outcome = f"not starting {title}: {held}; trigger action start to resume"
            elif action == RESET:
                self.hold_file.unlink(missing_ok=True)
                self._stop()
                removed = self._reset()
                after = self._start()
                outcome = f"{removed}; started {title} again: pid {after.pid}"
            else:
                self.hold_file.unlink(missing_ok=True)
                if action == "restart":
                    self._stop()
                after = self._start()
                verb = "restarted" if action == "restart" else "started"
                outcome = f"{verb} {title}: pid {after.pid} (log: {after.log_file})"
        return {
            "action": action,
            "outcome": outcome,
            "running": after is not None,
            "pid": after.pid if after else None,
            "started_at": after.started_at.isoformat() if after and after.started_at else None,
        }

    def held(self) -> str | None:
        """Why the stream is held down (an operator stopped it), or None."""
        try:
            return self.hold_file.read_text().strip() or "stopped on request"
        except FileNotFoundError:
            return None

    def assess(self, first_batch_timeout: float | None = None) -> Health:
        """Judge the running stream, first giving a new one time for its first micro-batch
        (default: the config's first_batch_timeout_seconds)."""
        waits = self.settings.supervisor
        if first_batch_timeout is None:
            first_batch_timeout = waits.first_batch_timeout_seconds
        confirmed = False
        while True:
            now = self.status()
            if not now.running:
                raise SupervisorError(
                    f"{now.describe()}; last lines of its log:\n{self.proc.log_tail(25)}"
                )
            health = self.judge(now.started_at)
            if health.status == "stale" and not confirmed:
                confirmed = True
                time.sleep(waits.stale_confirm_seconds)
                continue
            waiting_for_first = health.status == "starting" and health.records_waiting > 0
            if not waiting_for_first or (now.uptime_seconds or 0) >= first_batch_timeout:
                return health
            time.sleep(waits.poll_seconds)

    def judge(self, running_since: datetime | None) -> Health:
        """The stream's health now, from its progress rows and Kafka's end offsets."""
        raise NotImplementedError

    def _start(self) -> StreamStatus:
        current = self.status()
        if current.running:
            raise SupervisorError(
                f"not starting: {current.describe()}; stop it first, or restart it"
            )
        self._kill_leftovers()
        self.stop_file.unlink(missing_ok=True)
        # The caller's interpreter: the venv Airflow (or the test) runs in has pyspark.
        command = [sys.executable, "-m", self.stream.module]
        pid = self.proc.start(command, env=self._job_env(), cwd=REPO_ROOT)
        deadline = time.monotonic() + self.settings.supervisor.startup_check_seconds
        while time.monotonic() < deadline:
            _reap(pid)
            if self.proc.pid() != pid:
                self._kill_leftovers()
                self.proc.pid_file.unlink(missing_ok=True)
                raise SupervisorError(
                    f"{self.stream.title} (pid {pid}) exited right after starting; "
                    f"see {self.proc.log_file}. Last lines:\n{self.proc.log_tail(25)}"
                )
            time.sleep(0.5)
        return self.status()

    def _job_env(self) -> dict[str, str]:
        # The stream needs none of Airflow's settings, and should not hold its secrets.
        env = {k: v for k, v in os.environ.items() if not k.lstrip("_").startswith("AIRFLOW")}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
        return env

    def _reset(self) -> str:
        """The stopped stream's job run with --reset; what it said it removed."""
        done = subprocess.run(
            [sys.executable, "-m", self.stream.module, "--reset"],
            env=self._job_env(),
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=RESET_TIMEOUT_SECONDS,
        )
        if done.returncode != 0:
            raise SupervisorError(
                f"the reset of {self.stream.title} failed (exit {done.returncode}); it is left "
                f"stopped: {done.stderr.strip()[-2000:]}"
            )
        said = [line for line in done.stdout.splitlines() if line.startswith("==> ")]
        return said[-1].removeprefix("==> ") if said else "reset"

    def _stop(self, timeout: float | None = None) -> bool:
        if timeout is None:
            timeout = self.settings.supervisor.stop_timeout_seconds
        pid = self.proc.pid()
        if pid is None:
            self._kill_leftovers()
            self.proc.pid_file.unlink(missing_ok=True)
            return False
        self.stop_file.touch()
        # Only the Python driver: a SIGTERM to the whole group would end the JVM mid-batch.
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while self.proc.pid() == pid and time.monotonic() < deadline:
            _reap(pid)
            time.sleep(0.5)
        # The JVM exits by itself once its driver has gone; kill it only if it lingers.
        if self.proc.pid() == pid or not _wait_group_gone(pid, 15):
            _kill_group(pid)
        self.proc.pid_file.unlink(missing_ok=True)
        self.stop_file.unlink(missing_ok=True)
        return True

    @contextlib.contextmanager
    def _lock(self) -> Iterator[None]:
        # Two callers starting at once (a scheduled run, a test, a shell) would make two
        # writers of the same tables (one writer per table set): one at a time.
        self.run_dir.mkdir(parents=True, exist_ok=True)
        with open(self.run_dir / f"{self.stream.name}.lock", "w") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            yield

    def _kill_leftovers(self) -> None:
        """End what is left of a previous run's process group (e.g. its JVM after the driver
        was killed), so two drivers never write the same tables (one writer per table set).
        Linux does not reuse a pid while a group still bears it, so the group is ours."""
        try:
            old = int(self.proc.pid_file.read_text().strip())
        except (FileNotFoundError, ValueError):
            return
        if self.proc.pid() is None:
            _kill_group(old)
            self.proc.pid_file.unlink(missing_ok=True)


class SpeedLayerSupervisor(StreamSupervisor):
    """The speed layer (jobs.speed_layer), judged from ops.speed_progress."""

    def __init__(self, settings: Settings, run_dir: Path | None = None) -> None:
        super().__init__(settings, speed_layer_stream(), run_dir)

    def judge(self, running_since: datetime | None) -> Health:
        from lakehouse.core.kafka_offsets import end_offsets
        from lakehouse.speed.progress import judge_health, latest_progress

        return judge_health(
            latest_progress(self.settings),
            datetime.now(UTC),
            end_offsets(self.settings),
            self.settings,
            running_since=running_since,
        )


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _kill_group(pgid: int) -> None:
    if group_members(pgid):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
        _wait_group_gone(pgid, 10)


def _wait_group_gone(pgid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while group_members(pgid):
        _reap(pgid)
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def group_members(pgid: int) -> list[int]:
    """Live (not zombie) processes of a process group: a zombie no one reaps is harmless."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            state, _ppid, group = stat.read_text().rsplit(")", 1)[1].split()[:3]
        except (OSError, IndexError, ValueError):
            continue  # exited while we looked
        if int(group) == pgid and state != "Z":
            members.append(int(stat.parent.name))
    return members


def _reap(pid: int) -> None:
    # When this process started the stream itself (tests, restart in one task), the exited
    # driver is our child: collect it, or it stays a zombie until we exit.
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
