"""Exactly-once: kill -9 the speed layer at random moments, restart it, and the final tables
equal those of an uninterrupted run over the same log."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from lakehouse.core.config import Settings, load_settings
from lakehouse.generator.clickstream import ANOMALY_PRESETS, GeneratorConfig, produce
from lakehouse.speed.micro_batch import SpeedOutputs
from tests.conftest import new_topic

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

REPO = Path(__file__).parents[2]
OUT = SpeedOutputs.live()
# Columns that record when something happened, not what: they differ between any two runs.
WALL_CLOCK = {
    "ingested_at",
    "quarantined_at",
    "processed_at",
    "duration_seconds",
    "rows_per_second",
    "freshness_seconds",
    "step_seconds",
    "kafka_lag",
    "total_lag",
    "app_id",
    "silver_version",
}


def job_env(tmp: Path, topic: str) -> dict[str, str]:
    env = {
        **os.environ,
        "TRIBUTARY_PROFILE": "local",
        "PYTHONPATH": str(REPO),
        "TRIBUTARY__STORAGE__ROOT": str(tmp / "lake"),
        "TRIBUTARY__STORAGE__CHECKPOINTS": str(tmp / "checkpoints"),
        "TRIBUTARY__KAFKA__TOPIC": topic,
        "TRIBUTARY__SPEED__MAX_OFFSETS_PER_TRIGGER": "500",
    }
    return env


def start_job(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "jobs.speed_layer",
                "--available-now",
                "--stop-file",
                str(log.with_suffix(".stop")),
            ],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def start_continuous(env: dict[str, str], log: Path, stop_file: Path) -> subprocess.Popen[bytes]:
    """The speed layer in continuous mode: it runs until stopped."""
    with open(log, "ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "jobs.speed_layer", "--stop-file", str(stop_file)],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def run_to_completion(env: dict[str, str], log: Path) -> None:
    proc = start_job(env, log)
    assert proc.wait(timeout=900) == 0, log.read_text()[-3000:]


def snapshot(spark: SparkSession, settings: Settings) -> dict[str, list[tuple[object, ...]]]:
    tables = {}
    for name in (
        "raw",
        "quarantine",
        "silver",
        "counts",
        "active_users",
        "sessions",
        "late",
        "progress",
    ):
        df = spark.read.format("delta").load(getattr(OUT, name).path(settings))
        kept = [c for c in df.columns if c not in WALL_CLOCK]
        tables[name] = sorted(tuple(str(v) for v in row) for row in df.select(*kept).collect())
    return tables


def settings_for(env: dict[str, str]) -> Settings:
    return load_settings("local", env)


def committed_batches(settings: Settings) -> int:
    """Micro-batches committed so far: one progress-table commit (a JSON file) per batch."""
    return len(list(Path(OUT.progress.path(settings), "_delta_log").glob("*.json")))


def wait_for(
    check: Callable[[], bool], proc: subprocess.Popen[bytes], timeout: float = 240
) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if proc.poll() is not None or time.monotonic() > deadline:
            return
        time.sleep(0.5)


def test_kill_minus_nine_and_restart_changes_no_result(
    spark: SparkSession, kafka_up: str, tmp_path: Path
) -> None:
    topic = new_topic("restarts")
    calm, killed = tmp_path / "calm", tmp_path / "killed"
    calm_env, killed_env = job_env(calm, topic), job_env(killed, topic)
    cfg = GeneratorConfig(
        count=2500,
        seed=7,
        start=datetime.now(UTC) - timedelta(hours=2),
        rate=2.0,
        users=40,
        **ANOMALY_PRESETS["default"],
    )
    produce(settings_for(calm_env), cfg, tmp_path / "ledger.jsonl", topic=topic)

    run_to_completion(calm_env, calm / "job.log")

    rng = random.Random(2026)
    kills = 0
    for _ in range(3):
        proc = start_job(killed_env, killed / "job.log")
        # Wait for the next committed batch, then strike at a random moment of the one after:
        # the kill lands mid-batch however fast or slow this machine is.
        done = committed_batches(settings_for(killed_env))
        wait_for(lambda done=done: committed_batches(settings_for(killed_env)) > done, proc)
        time.sleep(rng.uniform(0.5, 6))
        if proc.poll() is not None:
            break  # it finished before we could kill it: nothing left to interrupt
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        kills += 1
    run_to_completion(killed_env, killed / "job.log")
    assert kills >= 2, "the run must actually have been interrupted"
    assert committed_batches(settings_for(killed_env)) >= kills + 2

    calm_tables = snapshot(spark, settings_for(calm_env))
    killed_tables = snapshot(spark, settings_for(killed_env))
    for name, rows in calm_tables.items():
        assert killed_tables[name] == rows, f"{name} differs after kill -9 and restart"
    assert len(calm_tables["raw"]) == cfg.count


@pytest.mark.parametrize("signal_kind", ["sigterm", "stop_file"])
def test_graceful_stop_from_outside_finishes_the_batch(
    kafka_up: str, tmp_path: Path, signal_kind: str
) -> None:
    topic = new_topic("graceful")
    env = job_env(tmp_path, topic)
    cfg = GeneratorConfig(count=300, seed=3, start=datetime.now(UTC) - timedelta(hours=1), rate=1.0)
    produce(settings_for(env), cfg, tmp_path / "ledger.jsonl", topic=topic)
    log = tmp_path / "job.log"
    proc = start_continuous(env, log, tmp_path / "stop")
    deadline = time.monotonic() + 180
    while "batch" not in _progress_text(env) and time.monotonic() < deadline:
        time.sleep(2)
    if signal_kind == "sigterm":
        proc.send_signal(signal.SIGTERM)
    else:
        (tmp_path / "stop").touch()
    assert proc.wait(timeout=120) == 0, log.read_text()[-3000:]
    assert "speed layer stopped" in log.read_text()


def test_a_graceful_stop_behind_a_backlog_does_not_wait_for_the_backlog(
    kafka_up: str, tmp_path: Path, spark: SparkSession
) -> None:
    """Behind a backlog one batch starts as soon as another commits: the stop must still come
    after the running batch, not once the log is drained, and lose nothing."""
    topic = new_topic("backlog-stop")
    env = {**job_env(tmp_path, topic), "TRIBUTARY__SPEED__MAX_OFFSETS_PER_TRIGGER": "200"}
    an_hour_ago = datetime.now(UTC) - timedelta(hours=1)
    cfg = GeneratorConfig(count=4000, seed=5, start=an_hour_ago, rate=10.0)
    produce(settings_for(env), cfg, tmp_path / "ledger.jsonl", topic=topic)
    backlog_batches = cfg.count // 200
    settings = settings_for(env)
    log = tmp_path / "job.log"
    proc = start_continuous(env, log, tmp_path / "stop")
    wait_for(lambda: committed_batches(settings) >= 2, proc)
    (tmp_path / "stop").touch()
    at_request = committed_batches(settings)
    assert proc.wait(timeout=300) == 0, log.read_text()[-3000:]
    assert "speed layer stopped" in log.read_text()
    # The batch running at the request, and one more if it committed as the request was made.
    assert committed_batches(settings) <= at_request + 2 < backlog_batches, log.read_text()[-3000:]

    run_to_completion(env, tmp_path / "rest.log")
    assert OUT.raw is not None
    raw = spark.read.format("delta").load(OUT.raw.path(settings))
    assert raw.count() == cfg.count == raw.select("partition", "offset").distinct().count()


def _progress_text(env: dict[str, str]) -> str:
    path = Path(OUT.progress.path(settings_for(env)))
    return "batch" if (path / "_delta_log").exists() else ""


def test_a_second_writer_is_refused_with_the_holders_pid(tmp_path: Path) -> None:
    from lakehouse.core.locks import exclusive_writer

    env = job_env(tmp_path, new_topic("busy"))
    with exclusive_writer(settings_for(env), "speed_layer"):
        result = subprocess.run(
            [sys.executable, "-m", "jobs.speed_layer", "--available-now"],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert result.returncode == 1
    assert f"speed_layer is already running for {tmp_path / 'lake'} (pid {os.getpid()})" in (
        result.stderr
    )
    assert "Traceback" not in result.stderr
