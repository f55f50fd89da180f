"""The change data capture path's faults on the real services, each ending with nothing lost
and nothing applied twice: Kafka Connect killed with kill -9 while the generator writes (after
its restart Debezium may deliver again what it had not confirmed: bronze may hold a change
twice, current and history never), PostgreSQL restarted under a running connector, and the
changelog job dying in the middle of a batch. Each test captures through a
connector of its own (tests/integration/cdc_capture.py), on a PostgreSQL and a Kafka Connect
of this module's own (tests/integration/private_cdc_services.py): the other CDC modules use
the test run's pair meanwhile, which these faults never touch."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from jobs.contract import Exit
from lakehouse.cdc import changelog
from lakehouse.cdc.changelog import PROGRESS, current_table
from lakehouse.cdc.connector import wait_until_running
from lakehouse.cdc.shop import CAPTURED
from lakehouse.core.config import CdcSettings, Settings, get_settings
from lakehouse.core.processes import port_open
from tests.delta_files import commits
from tests.integration.cdc_capture import (
    assert_progress_adds_up,
    assert_tables_as_the_ledger_says,
    generate,
    job_env,
    new_key_prefix,
    own_capture,
    settings_of,
    table_rows,
    wait_until_published,
)
from tests.integration.private_cdc_services import CdcPair, private_cdc_pair
from tests.jobs_in_process import RunJob

REPO = Path(__file__).parents[2]


@pytest.fixture
def prefix() -> str:
    return new_key_prefix()


@pytest.fixture(scope="module")
def pair(kafka_up: str) -> Iterator[CdcPair]:
    with private_cdc_pair(get_settings(), "cdc-faults") as started:
        yield started


@pytest.fixture
def capture(pair: CdcPair, prefix: str) -> Iterator[CdcSettings]:
    pair.ensure_up()
    with own_capture(pair.cdc, prefix) as own:
        yield own


def run_stream(run_job_here: RunJob, env: dict[str, str], lake: Path) -> None:
    stop_file = str(lake.parent / f"{lake.name}.stop")
    ran = run_job_here("jobs.cdc", "--available-now", "--stop-file", stop_file, **env)
    assert ran.returncode == Exit.OK, ran.stderr[-3000:]


class Writing:
    """The change generator running in a thread, paced, while a fault happens."""

    def __init__(self, cdc: CdcSettings, prefix: str, ledger: Path, **options: Any) -> None:
        self.ledger = ledger
        self.entries: list[dict[str, Any]] = []
        self.error: BaseException | None = None

        def write() -> None:
            try:
                self.entries = generate(cdc, prefix, ledger, **options)
            except BaseException as err:  # raised in the test's thread by join()
                self.error = err

        self.thread = threading.Thread(target=write, daemon=True)
        self.thread.start()

    def written(self) -> int:
        return len(self.ledger.read_text().splitlines()) if self.ledger.exists() else 0

    def join(self) -> list[dict[str, Any]]:
        self.thread.join(timeout=300)
        assert not self.thread.is_alive(), "the generator did not finish"
        if self.error is not None:
            raise self.error
        return self.entries


def wait_for(check: Callable[[], bool], timeout: float, what: str, every: float = 0.2) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"{what}: not after {timeout:.0f}s"
        time.sleep(every)


def committed_lsn(cdc: CdcSettings) -> int:
    """The source LSN Kafka Connect has committed for the connector (its offsets endpoint);
    0 before its first commit."""
    url = f"{cdc.connect_url}/connectors/{urllib.parse.quote(cdc.connector_name)}/offsets"
    with urllib.request.urlopen(url, timeout=10) as response:
        offsets = json.load(response).get("offsets", [])
    return max((int(o["offset"].get("lsn", 0)) for o in offsets), default=0)


def ledger_lsn(ledger: Path, change: int) -> int | None:
    """The LSN of the ledger's `change`-th change (from 1), once it is written."""
    lines = ledger.read_text().splitlines() if ledger.exists() else []
    return int(json.loads(lines[change - 1])["lsn"]) if len(lines) >= change else None


def test_connect_killed_mid_stream_loses_nothing_and_applies_nothing_twice(
    minio_settings: Settings,
    pair: CdcPair,
    capture: CdcSettings,
    prefix: str,
    run_job_here: RunJob,
    tmp_path: Path,
) -> None:
    writing = Writing(capture, prefix, tmp_path / "changes.jsonl", count=360, seed=51, rate=40.0)
    wait_for(lambda: writing.written() >= 80, 60, "the generator's first changes")
    # Mid-stream: after Connect has committed offsets past the first changes, so the restart
    # resumes from them. A connector killed before its first commit has no offset: Debezium
    # snapshots the tables again (snapshot.mode=initial), and the changes between what it had
    # published and the new snapshot reach the topics only as the snapshot's rows.
    twentieth = ledger_lsn(writing.ledger, 20)
    assert twentieth is not None
    wait_for(lambda: committed_lsn(capture) >= twentieth, 60, "Connect's offsets past change 20")
    connect = pair.connect
    pid = connect.proc("connect").pid()
    assert pid is not None, "the module's Kafka Connect runs"
    os.killpg(pid, signal.SIGKILL)  # the worker is its process group's leader
    # The worker's main thread is reaped before its other threads let go of the REST port.
    svc = pair.ctx.settings.services

    def gone() -> bool:
        return connect.proc("connect").pid() is None and not port_open(
            svc.bind_host, svc.connect_port
        )

    wait_for(gone, 30, "Connect gone after kill -9")
    killed_at = writing.written()
    connect.start()
    wait_until_running(capture, timeout=120)
    entries = writing.join()
    assert killed_at < len(entries), "the generator went on writing across the crash"
    wait_until_published(minio_settings, capture, prefix, entries, timeout=180)

    lake = tmp_path / "lake"
    env = job_env(lake, capture)
    settings = settings_of(env)
    run_stream(run_job_here, env, lake)
    assert_tables_as_the_ledger_says(settings, prefix, entries)
    assert_progress_adds_up(settings, capture)


def test_postgres_restarted_under_the_connector_the_next_changes_still_arrive(
    minio_settings: Settings,
    pair: CdcPair,
    capture: CdcSettings,
    prefix: str,
    run_job_here: RunJob,
    tmp_path: Path,
) -> None:
    before = generate(capture, prefix, tmp_path / "before.jsonl", 30, seed=61)
    wait_until_published(minio_settings, capture, prefix, before)
    postgres = pair.postgres
    postgres.stop()
    postgres.start()
    after = generate(capture, prefix, tmp_path / "after.jsonl", 30, seed=62)
    entries = before + after
    # Debezium's task meets the closed replication connection, and Connect restarts it.
    wait_until_published(minio_settings, capture, prefix, entries, timeout=180)
    wait_until_running(capture, timeout=120)

    lake = tmp_path / "lake"
    env = job_env(lake, capture)
    settings = settings_of(env)
    run_stream(run_job_here, env, lake)
    assert_tables_as_the_ledger_says(settings, prefix, entries)
    assert_progress_adds_up(settings, capture)


class InjectedCrash(Exception):
    """The changelog job dying at the hardest moment of a batch (raised in its foreachBatch)."""


def test_the_changelog_job_crashing_mid_batch_and_restarted_changes_no_result(
    minio_settings: Settings,
    capture: CdcSettings,
    prefix: str,
    run_job_here: RunJob,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """Small batches, and the job dies once a batch's tables have committed and its progress
    row has not, with more batches to come: the restart must finish that batch with the first
    try's decisions (current, history and bronze as the generator's ledger says, the progress
    rows counting each change once). The crash is injected in-process: the query fails there,
    as a process killed there leaves its checkpoint and tables. A real kill -9 of a stream job
    is in tests/integration/test_speed_layer_restarts.py, and Connect's in the test above."""
    # Three batches of at most 60 changes: the crash in the second, one more after it.
    entries = generate(capture, prefix, tmp_path / "changes.jsonl", 150, seed=71)
    wait_until_published(minio_settings, capture, prefix, entries)
    small = {"TRIBUTARY__SPEED__MAX_OFFSETS_PER_TRIGGER": "60"}
    crashed = tmp_path / "crashed"
    env = job_env(crashed, capture, **small)
    settings = settings_of(env)
    append_new = changelog.append_new
    progress_rows: list[int] = []

    def crash_before_the_second_progress_row(frame: Any, target: Any, *args: Any) -> Any:
        if target is PROGRESS:
            progress_rows.append(1)
            if len(progress_rows) == 2:
                raise InjectedCrash("the job died after the batch's tables, before its progress")
        return append_new(frame, target, *args)

    monkeypatch.setattr(changelog, "append_new", crash_before_the_second_progress_row)
    stop_file = str(tmp_path / "crashed.stop")
    ran = run_job_here("jobs.cdc", "--available-now", "--stop-file", stop_file, **env)
    monkeypatch.setattr(changelog, "append_new", append_new)
    assert ran.returncode == Exit.FAILED, ran.stderr[-3000:]
    assert len(progress_rows) == 2, "it died at the second batch's progress row"
    currents = [current_table(c).path(settings) for c in CAPTURED.values()]
    assert len(table_rows(settings, PROGRESS)) == 1
    assert max(commits(p) for p in currents) > 1, "the second batch's tables committed"

    run_stream(run_job_here, env, crashed)
    assert_tables_as_the_ledger_says(settings, prefix, entries)
    assert_progress_adds_up(settings, capture)
    assert len(table_rows(settings, PROGRESS)) > 2, "batches after it"
