"""A run's ledger read back, and the pacing the generators share."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from lakehouse.generator.ledger import read_ledger, sleep_until


def test_a_ledger_reads_back_in_the_order_written_blank_lines_left_out(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.jsonl"
    ledger.write_text('{"seq": 2, "kind": "b"}\n\n{"seq": 1, "kind": "a"}\n')
    assert read_ledger(ledger) == [{"seq": 2, "kind": "b"}, {"seq": 1, "kind": "a"}]
    assert read_ledger(str(ledger)) == read_ledger(ledger)


class Waits(threading.Event):
    """An event that records how long each wait on it was asked to last, and never blocks."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[float | None] = []

    def wait(self, timeout: float | None = None) -> bool:
        self.asked.append(timeout)
        return self.is_set()


def test_the_wait_is_on_the_stop_event_for_the_time_left() -> None:
    stop = Waits()
    sleep_until(time.monotonic() + 60, stop)
    [asked] = stop.asked
    assert asked is not None and 50 < asked <= 60


def test_a_deadline_past_or_about_to_pass_does_not_wait() -> None:
    stop = Waits()
    sleep_until(time.monotonic() - 1, stop)
    sleep_until(time.monotonic(), stop)
    assert stop.asked == []
