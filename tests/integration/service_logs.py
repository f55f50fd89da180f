"""Reading what a service's log gained during a test (the logs Proc.start appends to)."""

from __future__ import annotations

from pathlib import Path

from infra.services.keeper import MARK


def new_lines(log: Path, since: int) -> str:
    """What `log` gained after its first `since` bytes."""
    if not log.is_file():
        return ""
    with open(log, "rb") as f:
        f.seek(since)
        return f.read().decode(errors="replace")


def log_tail(text: str, lines: int = 40) -> str:
    """The last lines of a log before the process was started again: up to the keeper's line
    saying it exited, or else up to the line Proc.start writes."""
    if MARK in text:
        end = text.find("\n", text.rindex(MARK))
        before_restart = text if end == -1 else text[:end]
    else:
        before_restart = text.rsplit("\n--- 20", 1)[0]
    return "\n".join(before_restart.splitlines()[-lines:])
