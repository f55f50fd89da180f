"""A generator run's ledger (one JSON object a line, written as the run goes) read back, and
the pacing its runs share."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any


def read_ledger(path: str | Path) -> list[dict[str, Any]]:
    """The entries of one run's ledger, in the order the run wrote them."""
    with Path(path).open() as lines:
        return [json.loads(line) for line in lines if line.strip()]


def sleep_until(deadline: float, stop: threading.Event) -> None:
    """Wait until time.monotonic() reaches `deadline`, or `stop` is set."""
    delay = deadline - time.monotonic()
    if delay > 0.001:  # shorter sleeps cost more than they pace
        stop.wait(delay)  # not time.sleep: a stop request must not wait out a slow rate
