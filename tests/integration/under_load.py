"""The speed layer as a stream under load on the loopback cluster's brokers, for the fault
tests (tests/integration/test_cluster.py): the producer in real time, the checks against its
ledger."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from lakehouse.core.config import Settings, load_settings
from lakehouse.core.paths import REPO_ROOT
from lakehouse.generator.clickstream import preset_config, produce


def newest_batch(settings: Settings) -> datetime:
    """When the stream committed its newest batch (read from MinIO, as any reader reads)."""
    from lakehouse.speed.progress import latest_progress

    rows = latest_progress(settings, 1)
    return rows[0]["processed_at"] if rows else datetime.min.replace(tzinfo=UTC)


class UnderLoad:
    """The speed layer as a stream (its own process) on a topic of the cluster's brokers while
    `count` events are produced in real time, 200 a second; the `with` body starts 4 s into
    producing, injects its fault, then calls catch_up() and stop(). each_event_once() checks
    what the stream wrote against the producer's ledger."""

    def __init__(self, env: dict[str, str], folder: Path, count: int = 2400) -> None:
        self.env = {**env, "TRIBUTARY__SPEED__MAX_OFFSETS_PER_TRIGGER": "100000"}
        self.settings = load_settings("cluster", self.env)
        self.stop_file, self.log = folder / "stop", folder / "speed.log"
        self.ledger = folder / "ledger.jsonl"
        self.cfg = preset_config(
            "default", {}, count=count, seed=34, start=datetime.now(UTC), rate=200, users=25
        )
        self.stopping = threading.Event()
        self.failures: list[BaseException] = []
        self.sent: list[dict[str, Any]] = []

    def __enter__(self) -> UnderLoad:
        from lakehouse.core.kafka_io import ensure_topic

        ensure_topic(self.settings)
        with open(self.log, "w") as log:
            self.stream = subprocess.Popen(
                [sys.executable, "-m", "jobs.speed_layer", "--stop-file", str(self.stop_file)],
                env=self.env,
                cwd=REPO_ROOT,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        try:
            wait_for(
                lambda: "speed layer running" in self.log.read_text(), 400, "the stream to start"
            )
        except BaseException:
            self.__exit__()
            raise
        self.producer = threading.Thread(target=self._send, daemon=True)
        self.producer.start()
        time.sleep(4)
        return self

    def _send(self) -> None:
        try:
            produce(self.settings, self.cfg, self.ledger, realtime=True, stop=self.stopping)
        except BaseException as err:  # the test reports it
            self.failures.append(err)

    def catch_up(self) -> None:
        """Every record acknowledged, and read by the stream, which is still running."""
        from lakehouse.core.kafka_offsets import end_offsets
        from lakehouse.generator.ledger import read_ledger
        from lakehouse.speed.progress import latest_progress

        self.producer.join(timeout=120)
        assert not self.producer.is_alive() and not self.failures, self.failures
        self.sent = read_ledger(self.ledger)
        assert len(self.sent) == self.cfg.count, "every record acknowledged"
        ends = end_offsets(self.settings)

        def read_all() -> bool:
            # A batch names only the partitions it read: the newest offset of each is the
            # highest among the recent batches.
            rows = latest_progress(self.settings, 50)
            read = {p: max((r["offsets"].get(p, 0) for r in rows), default=0) for p in ends}
            return all(read[p] >= n for p, n in ends.items())

        wait_for(read_all, 400, "the stream to read the whole topic")
        assert self.stream.poll() is None, "the stream died: " + self.log.read_text()[-3000:]

    def stop(self) -> None:
        self.stop_file.touch()
        assert self.stream.wait(timeout=300) == 0, self.log.read_text()[-3000:]

    def __exit__(self, *_: object) -> None:
        self.stopping.set()
        if self.stream.poll() is None:
            os.killpg(self.stream.pid, signal.SIGKILL)

    def each_event_once(self) -> list[dict[str, Any]]:
        """Every accepted event of the ledger in silver once, no other, and each record read
        by one batch; the stream's progress rows."""
        from lakehouse.core.small_tables import table_rows
        from lakehouse.core.tables import table

        ids = [r["event_id"] for r in table_rows(self.settings, table("silver.events"))]
        assert len(ids) == len(set(ids)), "an event twice in silver"
        accepted = {e["event_id"] for e in self.sent if e["expected"] == "silver"}
        missing, extra = len(accepted - set(ids)), len(set(ids) - accepted)
        assert set(ids) == accepted, f"{missing} accepted events missing, {extra} extra"
        progress = table_rows(self.settings, table("ops.speed_progress"))
        assert sum(r["input_rows"] for r in progress) == len(self.sent), "a record read twice"
        return progress


def wait_for(check: Any, timeout: float, what: str) -> None:
    """Until `check()` holds; `timeout` guards against a hang (set it for a loaded machine)."""
    import time

    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(1)
