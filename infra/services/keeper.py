"""Keeps one service process running: starts it again when it exits, as a service manager's
restart policy does (docker-compose.yml: `restart: unless-stopped`).

    python -m infra.services.keeper [--min-uptime S] [--delay S] -- COMMAND [ARG...]

Airflow's long-running components exit when their loop raises (the scheduler on a DAG run
deleted under it, or on a database error), and nothing else would start them again: the
platform would stop scheduling and say nothing. A process that exits sooner than
`--min-uptime` after its start did not start at all (a bad setting, a port in use): the keeper
exits with its status rather than restart it forever, so `make up` reports it as before.

The keeper and its process share one process group (the group `Proc.start` makes), and they
are stopped together through it: SIGTERM or SIGINT reaches both, the keeper waits for the
process to end and exits without starting it again. The signal is not sent on: the process got
it already, and Airflow takes a second SIGTERM for "stop without waiting for running tasks".
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import time
from types import FrameType

MARK = "--- keeper: "  # begins each line the keeper writes to the process's log
MIN_UPTIME_SECONDS = 60.0
RESTART_DELAY_SECONDS = 5.0


def keep(command: list[str], min_uptime: float, delay: float) -> int:
    """Run `command` until a signal stops the keeper; its last exit status."""
    stopping = False

    def stop(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    name = command[0].rsplit("/", 1)[-1] + (f" {command[1]}" if len(command) > 1 else "")
    while True:
        started = time.monotonic()
        status = subprocess.call(command)
        lived = time.monotonic() - started
        if stopping:
            return status
        if lived < min_uptime:
            say(f"{name} exited with status {status} {lived:.0f} s after its start: not restarted")
            return status or 1
        say(f"{name} exited with status {status} after {lived:.0f} s; starting it again")
        time.sleep(delay)
        if stopping:
            return status


def say(line: str) -> None:
    print(f"{MARK}{line}", flush=True)


def exit_status(status: int) -> int:
    """A process's status as a shell gives it: a process killed by signal N is 128 + N."""
    return 128 - status if status < 0 else status


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m infra.services.keeper", description=__doc__)
    parser.add_argument("--min-uptime", type=float, default=MIN_UPTIME_SECONDS)
    parser.add_argument("--delay", type=float, default=RESTART_DELAY_SECONDS)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to keep running after --")
    return exit_status(keep(command, args.min_uptime, args.delay))


def kept(command: list[str]) -> list[str]:
    """`command`, started under a keeper."""
    return [sys.executable, "-m", "infra.services.keeper", "--", *command]


if __name__ == "__main__":
    sys.exit(main())
