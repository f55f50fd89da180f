"""Running a service as a background process: pid files, ports, health waits, logs.

Every service process runs in its own session (process group), so `stop` ends it together with
its children, and it outlives the shell or Airflow task that started it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path


class ServiceError(Exception):
    """A service cannot start or stop; the message is one line with the cause and the remedy."""


@dataclass(frozen=True)
class Proc:
    """One background process of a service, known by its pid file."""

    name: str
    run_dir: Path

    @property
    def pid_file(self) -> Path:
        return self.run_dir / f"{self.name}.pid"

    @property
    def log_file(self) -> Path:
        return self.run_dir / "logs" / f"{self.name}.log"

    def pid(self) -> int | None:
        try:
            pid = int(self.pid_file.read_text().strip())
        except (FileNotFoundError, ValueError):
            return None
        return pid if _alive(pid) else None

    def start(self, cmd: list[str], env: Mapping[str, str], cwd: Path | None = None) -> int:
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_file, "ab") as log:
            log.write(f"\n--- {time.strftime('%Y-%m-%d %H:%M:%S')} starting {cmd[0]}\n".encode())
            log.flush()
            try:
                proc = subprocess.Popen(
                    cmd,
                    env=dict(env),
                    cwd=cwd,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                )
            except FileNotFoundError:
                raise ServiceError(f"{self.name}: {cmd[0]} not found; run `make setup`") from None
        self.pid_file.write_text(f"{proc.pid}\n")
        return proc.pid

    def stop(self, timeout: float = 30, sig: signal.Signals = signal.SIGTERM) -> bool:
        """Send `sig` to the process group, SIGKILL it after `timeout`. True if it was
        running."""
        pid = self.pid()
        if pid is None:
            self.pid_file.unlink(missing_ok=True)
            return False
        _signal_group(pid, sig)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and _alive(pid):
            time.sleep(0.3)
        if _alive(pid):
            _signal_group(pid, signal.SIGKILL)
            time.sleep(0.5)
        # What its leader left behind in the group (a child that ignores SIGTERM and outlived
        # it, as an Airflow executor's idle worker can) is the service's too.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
        self.pid_file.unlink(missing_ok=True)
        return True

    def log_tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return "(no log)"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (exited, not yet reaped by its parent) is not running.
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


def _signal_group(pid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def processes_with_env(name: str, value: str) -> list[int]:
    """This user's processes (but this one) whose environment sets `name` to `value`: what a
    service's processes started, however they detached themselves (a new session, a parent
    that died). Read from /proc; none where there is no /proc."""
    wanted = f"{name}={value}".encode()
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:  # gone, or another user's
            continue
        if wanted in environ.split(b"\0") and int(entry.name) != os.getpid():
            found.append(int(entry.name))
    return sorted(found)


def stop_processes(pids: list[int], timeout: float = 30) -> None:
    """SIGTERM each of `pids`, then SIGKILL those still running after `timeout`."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(_alive(pid) for pid in pids):
        time.sleep(0.3)
    for pid in pids:
        if _alive(pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


def stop_on_signals() -> threading.Event:
    """An event set by Ctrl-C or SIGTERM (an Airflow task being killed), for a loop that ends
    cleanly at its next step instead of dying halfway."""
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    return stop


def port_open(host: str, port: int, timeout: float = 1.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def require_free_port(service: str, host: str, port: int, setting: str) -> None:
    if port_open(host, port):
        raise ServiceError(
            f"{service}: port {host}:{port} is already in use by another program; stop it "
            f"(`ss -ltnp 'sport = :{port}'` shows which) or choose another port with {setting}"
        )


def http_ok(url: str, timeout: float = 3.0) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return 200 <= response.status < 300
    except (urllib.error.URLError, OSError, ValueError):
        return False


def wait_until(
    check: Callable[[], bool],
    *,
    timeout: float,
    what: str,
    proc: Proc | None = None,
    every: float = 1.0,
) -> None:
    """Poll `check` until it holds; fail early if `proc` died, with the end of its log."""
    started = time.monotonic()
    shown = started
    while time.monotonic() - started < timeout:
        if check():
            return
        if proc is not None and proc.pid() is None:
            raise ServiceError(
                f"{proc.name} exited while {what}; see {proc.log_file}. Last lines:\n"
                + proc.log_tail()
            )
        if time.monotonic() - shown > 15:
            print(f"    ... still {what} ({time.monotonic() - started:.0f}s)", flush=True)
            shown = time.monotonic()
        time.sleep(every)
    where = f"; see {proc.log_file}" if proc else ""
    raise ServiceError(f"timed out after {timeout:.0f}s {what}{where}")
