"""Object storage going away while a job runs: said while it lasts, and one clear line if the
job fails of it. S3-generic: the endpoint is probed with a TCP connection, and a failure is
recognised by the connection errors of Spark's S3 client (S3A on the AWS SDK).

Spark's S3 client retries a request that cannot connect (fs.s3a.retry.limit,
fs.s3a.attempts.maximum): a short outage only slows the job down, so the job says that it
waits and when storage answers again; a longer one fails it, and every Delta table stays at
its last committed version (a commit is one atomic write of the table's log).
"""

from __future__ import annotations

import re
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlparse

from lakehouse.core.config import Settings
from lakehouse.core.processes import port_open

# How a request that never reached the server fails: in the AWS SDK under Spark's S3A, in the
# JVM, and in delta-rs (Rust's object_store) under the jobs' small reads.
_UNREACHABLE = re.compile(
    r"Connection refused|[Cc]onnect timed out|No route to host|UnknownHostException"
    r"|tcp connect error"
)
# The AWS SDK's own line for it, which names the address.
_SDK_LINE = re.compile(r"Connect to \S+ (?:\[[^\]]*\] )?failed: [^\n:;]+")


def lost_storage(err: BaseException, settings: Settings) -> str | None:
    """Why `err` is object storage not answering, in one line, or None when it failed for any
    other reason. For the jobs whose only remote service is object storage."""
    text = str(err)
    mark = _UNREACHABLE.search(text)
    if mark is None:
        return None
    sdk = _SDK_LINE.search(text)
    detail = sdk.group(0).strip() if sdk else mark.group(0)
    return (
        f"object storage at {settings.s3.endpoint} stopped answering during the run ({detail}); "
        "every table is at its last committed version and the run is not recorded: run it "
        "again once storage answers"
    )


def _reachable(settings: Settings) -> bool:
    url = urlparse(settings.s3.endpoint)
    port = url.port or (443 if url.scheme == "https" else 80)
    return port_open(url.hostname or "localhost", port, timeout=3)


@contextmanager
def storage_watched(settings: Settings, job: str, every: float = 5) -> Iterator[None]:
    """While the body runs, say on stderr when the lakehouse's object storage stops answering
    and when it answers again (nothing on local disk)."""
    if not settings.storage.on_s3:
        yield
        return
    done = threading.Event()
    endpoint = settings.s3.endpoint

    def watch() -> None:
        lost_at: float | None = None
        while not done.wait(every):
            up = _reachable(settings)
            if not up and lost_at is None:
                lost_at = time.monotonic()
                print(
                    f"{job}: object storage at {endpoint} is not answering; Spark's S3 client "
                    "retries, the run waits (it fails if storage stays away)",
                    file=sys.stderr,
                    flush=True,
                )
            elif up and lost_at is not None:
                away = time.monotonic() - lost_at
                print(
                    f"{job}: object storage at {endpoint} answers again (away about {away:.0f} s)",
                    file=sys.stderr,
                    flush=True,
                )
                lost_at = None

    watcher = threading.Thread(target=watch, name="storage-watch", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        watcher.join(timeout=every + 5)
