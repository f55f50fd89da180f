"""The speed layer's process under test: kill -9 it in the middle of a micro-batch and restart
it, and the final tables equal those of an uninterrupted run over the same log; stop it
gracefully (SIGTERM, or its stop file) behind a backlog, and it stops after the running batch;
start a second one, and it is refused. Only the processes under test (killed, signalled) are
processes of their own; the uninterrupted reference, the restart after the kill and the stop by
file run in this process."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from lakehouse.core.config import Settings, load_settings
from lakehouse.generator.clickstream import GeneratorConfig, preset_config, produce
from lakehouse.speed.micro_batch import VACUUMED
from lakehouse.speed.outputs import SpeedOutputs
from lakehouse.speed.stream import start_query
from tests.conftest import new_topic
from tests.delta_files import WALL_CLOCK, commits
from tests.jobs_in_process import RunJob

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

REPO = Path(__file__).parents[2]
OUT = SpeedOutputs.live()
# And the silver version a batch pinned: it differs between any two runs too.
RUN_COLUMNS = WALL_CLOCK | {"silver_version"}


def job_env(tmp: Path, topic: str) -> dict[str, str]:
    env = {
        **os.environ,
        "TRIBUTARY_PROFILE": "local",
        "PYTHONPATH": str(REPO),
        "TRIBUTARY__STORAGE__ROOT": str(tmp / "lake"),
        "TRIBUTARY__STORAGE__CHECKPOINTS": str(tmp / "checkpoints"),
        "TRIBUTARY__KAFKA__TOPIC": topic,
        "TRIBUTARY__SPEED__MAX_OFFSETS_PER_TRIGGER": "300",
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


def snapshot(spark: SparkSession, settings: Settings) -> dict[str, list[tuple[object, ...]]]:
    tables = {}
    for name in VACUUMED:  # every table the stream writes
        df = spark.read.format("delta").load(getattr(OUT, name).path(settings))
        kept = [c for c in df.columns if c not in RUN_COLUMNS]
        tables[name] = sorted(tuple(str(v) for v in row) for row in df.select(*kept).collect())
    return tables


def settings_for(env: dict[str, str]) -> Settings:
    return load_settings("local", env)


def committed_batches(settings: Settings) -> int:
    """Micro-batches committed so far: one progress-table commit per batch."""
    return commits(OUT.progress.path(settings))


def wait_for(
    check: Callable[[], bool],
    proc: subprocess.Popen[bytes],
    timeout: float = 240,
    every: float = 0.5,
) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if proc.poll() is not None or time.monotonic() > deadline:
            return
        time.sleep(every)


def test_kill_minus_nine_and_restart_changes_no_result(
    spark: SparkSession, kafka_up: str, tmp_path: Path, run_job_here: RunJob
) -> None:
    """One kill -9 at the hardest moment of a micro-batch: some of its tables have committed,
    the others and its progress row have not. The restart must replay that batch with the
    decisions of the first attempt, skip the writes that committed and do the rest, then go
    on. A kill before a batch's first commit only repeats the batch, and one after its last
    only skips it: both are steps of this case. Three batches' worth of records is enough: the
    kill lands in the second batch, after one whole batch, with more to come after the
    restart. The restart is the job's `main` in this process: what it must get right is the state
    the kill left (a dead process's lock, the checkpoint, the tables), read the same way from
    any process."""
    topic = new_topic("restarts")
    calm, killed = tmp_path / "calm", tmp_path / "killed"
    calm_env, killed_env = job_env(calm, topic), job_env(killed, topic)
    per_batch = int(killed_env["TRIBUTARY__SPEED__MAX_OFFSETS_PER_TRIGGER"])
    cfg = preset_config(
        "default",
        {},
        count=3 * per_batch,
        seed=7,
        start=datetime.now(UTC) - timedelta(hours=2),
        rate=2.0,
        users=40,
    )
    produce(settings_for(calm_env), cfg, tmp_path / "ledger.jsonl", topic=topic)

    # The uninterrupted run is the reference, not what is under test: it runs here.
    calm_settings = settings_for(calm_env)
    start_query(spark, calm_settings, OUT, available_now=True).awaitTermination()

    settings = settings_for(killed_env)
    silver = OUT.silver.path(settings)
    proc = start_job(killed_env, killed / "job.log")
    try:
        # Silver is among a batch's first writes to commit; its progress row is the last.
        wait_for(
            lambda: (
                committed_batches(settings) >= 1 and commits(silver) > committed_batches(settings)
            ),
            proc,
            every=0.02,
        )
        assert proc.poll() is None, (
            "the run ended before it could be killed: " + ((killed / "job.log").read_text()[-3000:])
        )
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    half_written = committed_batches(settings)
    assert commits(silver) > half_written, "the kill must land with a batch half-written"
    mine = {k: v for k, v in killed_env.items() if k.startswith("TRIBUTARY")}
    stop_file = str(killed / "restart.stop")
    restart = run_job_here("jobs.speed_layer", "--available-now", "--stop-file", stop_file, **mine)
    assert restart.returncode == 0, restart.stderr[-3000:]

    calm_tables = snapshot(spark, calm_settings)
    killed_tables = snapshot(spark, settings)
    for name, rows in calm_tables.items():
        assert killed_tables[name] == rows, f"{name} differs after kill -9 and restart"
    assert len(calm_tables["raw"]) == cfg.count
    assert half_written < len(calm_tables["progress"]), "the kill must leave batches to do"


def test_a_graceful_stop_behind_a_backlog_comes_after_the_running_batch(
    kafka_up: str, tmp_path: Path, spark: SparkSession, run_job_here: RunJob
) -> None:
    """Behind a backlog one batch starts as soon as another commits: a stop asked from outside
    (SIGTERM to a process of its own, whose signal handler is what is tested; then the stop
    file, to the job run in this process, whose watch of the file is) must still come after
    the running batch, not once the log is drained, end the job with status 0, and lose or
    repeat nothing. A backlog of twelve small batches is enough: a stop that waited for the backlog
    would commit all twelve, one that did not commits at most the running batch and the next."""
    topic = new_topic("backlog-stop")
    per_batch = 50
    env = {**job_env(tmp_path, topic), "TRIBUTARY__SPEED__MAX_OFFSETS_PER_TRIGGER": str(per_batch)}
    an_hour_ago = datetime.now(UTC) - timedelta(hours=1)
    cfg = GeneratorConfig(count=12 * per_batch, seed=5, start=an_hour_ago, rate=10.0)
    settings = settings_for(env)
    produce(settings, cfg, tmp_path / "ledger.jsonl", topic=topic)
    backlog_batches = cfg.count // per_batch
    stop_file = tmp_path / "stop"

    def stops_behind_the_backlog(how: str, before: int, at_request: int) -> None:
        # The batch running at the request, and one more if it committed as the request came.
        assert at_request > before, f"{how}: the stop must come behind the backlog"
        assert committed_batches(settings) <= at_request + 2 < backlog_batches, how

    log = tmp_path / "sigterm.log"
    proc = start_continuous(env, log, stop_file)
    before = committed_batches(settings)
    try:
        wait_for(lambda: committed_batches(settings) > before, proc)
        proc.send_signal(signal.SIGTERM)
        at_request = committed_batches(settings)
        assert proc.wait(timeout=300) == 0, log.read_text()[-3000:]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert "speed layer stopped" in log.read_text()
    stops_behind_the_backlog("sigterm", before, at_request)

    before = committed_batches(settings)
    asked: list[int] = []

    def ask_to_stop() -> None:
        deadline = time.monotonic() + 240
        while committed_batches(settings) <= before and time.monotonic() < deadline:
            time.sleep(0.5)
        stop_file.touch()
        asked.append(committed_batches(settings))

    asker = threading.Thread(target=ask_to_stop, daemon=True)
    asker.start()
    mine = {k: v for k, v in env.items() if k.startswith("TRIBUTARY")}
    stopped = run_job_here("jobs.speed_layer", "--stop-file", str(stop_file), **mine)
    asker.join()
    assert stopped.returncode == 0, stopped.stderr[-3000:]
    assert "speed layer stopped" in stopped.stdout + stopped.stderr
    stops_behind_the_backlog("stop_file", before, asked[0])

    # Nothing lost or repeated across the two stops: raw holds each offset of every partition
    # from the first up to where the last batch ended, once.
    assert OUT.raw is not None
    raw = spark.read.format("delta").load(OUT.raw.path(settings))
    per_partition = raw.groupBy("partition").agg(
        F.count("*").alias("rows"),
        F.countDistinct("offset").alias("offsets"),
        F.min("offset").alias("first"),
        F.max("offset").alias("last"),
    )
    for p in per_partition.collect():
        assert p["rows"] == p["offsets"] == p["last"] + 1 and p["first"] == 0, p


def test_a_second_writer_is_refused_with_the_holders_pid(
    tmp_path: Path, kafka_up: str, run_job_here: RunJob
) -> None:
    """The refusal is the job's (its exit status and one line), not its process's: the job
    runs in this process, which holds the lock as another speed layer would. The running
    one's pending stop request is left for it."""
    from lakehouse.core.locks import exclusive_writer

    env = job_env(tmp_path, new_topic("busy"))
    mine = {k: v for k, v in env.items() if k.startswith("TRIBUTARY")}
    stop = tmp_path / "stop"
    stop.touch()
    with exclusive_writer(settings_for(env), "speed_layer"):
        result = run_job_here(
            "jobs.speed_layer", "--available-now", "--stop-file", str(stop), **mine
        )
    assert stop.exists(), "the refused run took the running one's stop request"
    assert result.returncode == 1
    assert f"speed_layer is already running for {tmp_path / 'lake'} (pid {os.getpid()})" in (
        result.stderr
    )
    assert "Traceback" not in result.stderr
