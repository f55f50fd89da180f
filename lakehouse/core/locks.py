"""One writer per table set, enforced on this machine: Delta on S3 is safe with one writing
driver per table (S3SingleDriverLogStore), and no two jobs may interleave their commits.

A job that writes a set of tables holds an exclusive lock named after the set and the
storage root for as long as it runs. A second writer fails at once with the holder's pid
instead of corrupting the tables; the lock dies with its process, even on kill -9.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO

from lakehouse.core.config import Settings
from lakehouse.core.paths import state_dir


class WriterBusyError(Exception):
    """Another process is writing these tables."""


@contextmanager
def exclusive_writer(settings: Settings, writer: str, wait_seconds: float = 0) -> Iterator[None]:
    """Hold the writer's lock; wait up to `wait_seconds` for another holder to finish."""
    digest = hashlib.sha256(settings.storage.root.encode()).hexdigest()[:10]
    path = state_dir() / "run" / "locks" / f"{writer}-{digest}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as handle:
        deadline = time.monotonic() + wait_seconds
        locked = _try_lock(handle)
        while not locked and time.monotonic() < deadline:
            time.sleep(1)
            locked = _try_lock(handle)
        if not locked:
            handle.seek(0)
            holder = handle.read().strip() or "unknown"
            raise WriterBusyError(
                f"{writer} is already running for {settings.storage.root} (pid {holder}); "
                "stop it first (or let it finish) - two writers would corrupt its tables"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        yield


def _try_lock(handle: IO[str]) -> bool:
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True
