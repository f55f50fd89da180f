"""The pipeline on a real cluster on loopback (docs/cluster.md): a Spark standalone master with
two workers, three KRaft brokers and a 4-drive erasure-coded MinIO, started by the code
`make cluster-up` runs (tests/integration/loopback_cluster.py), and stopped at the end.

The same events, in a topic replicated on the three brokers, go through the speed layer, the
batch layer, a replay, the quality suites and the reconciliation twice: once on
spark://127.0.0.1:<port>, once on local[2], each into its own lakehouse on the cluster's
MinIO; every table they wrote must be identical. That the work was spread is read from Spark
itself: the driver's REST API must list two executors that both ran tasks, and the master
must have given the application both workers.

Faults, each while a job runs: the broker leading a partition killed with kill -9 and
restarted, an executor killed, then a worker killed and restarted (and a batch run beside
that stream gets executors of its own), a MinIO drive lost and restored, each under a stream
reading events produced meanwhile (nothing lost, nothing doubled, the recovery times
printed); MinIO stopped for 60 s during a batch run (waited out, or with its retries cut a
clear failure that changes nothing).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any

from infra.services.minio_cluster import MinioCluster
from jobs.contract import Exit
from lakehouse.core.config import Settings, load_settings
from lakehouse.core.paths import REPO_ROOT
from lakehouse.generator.clickstream import GeneratorConfig
from tests.conftest import new_topic
from tests.integration.loopback_cluster import (
    CLUSTER,
    DRIVER_UI_PORT,
    HOST,
    MASTER,
    MASTER_WEB,
    drive_states,
    holds_its_cores,
    lakehouse,
    leader_of,
    produce_closed_hours,
    workers_running,
)
from tests.integration.service_json import read_json
from tests.integration.under_load import UnderLoad, newest_batch, wait_for


def start_pipeline(env: dict[str, str], out: Path, start: datetime, end: datetime) -> Pipeline:
    argv = [str(out), start.isoformat(), end.isoformat()]
    if env["TRIBUTARY__SPARK__MASTER"].startswith("spark://"):
        argv.append(MASTER_WEB)
    log = open(out.with_suffix(".log"), "w+")  # noqa: SIM115 (closed by finish)
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.integration.cluster_run", *argv],
        env=env,
        cwd=REPO_ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
    )
    return Pipeline(env["TRIBUTARY__SPARK__MASTER"], proc, out, log)


class Pipeline:
    """One driver running tests/integration/cluster_run.py, its output in a log beside `out`."""

    def __init__(self, master: str, proc: subprocess.Popen[str], out: Path, log: IO[str]):
        self.master, self.proc, self.out, self.log = master, proc, out, log

    def finish(self) -> dict[str, Any]:
        try:
            # A guard against a hang, sized for a loaded machine (docs/testing.md, Conventions).
            status = self.proc.wait(timeout=1800)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
            self.log.seek(0)
            said = self.log.read()
            self.log.close()
        assert status == 0, f"the pipeline on {self.master} exited {status}:\n{said[-5000:]}"
        found: dict[str, Any] = json.loads(self.out.read_text())
        # What each step took, for docs/cluster.md (shown with pytest -s).
        steps = ", ".join(f"{k} {v:.0f} s" for k, v in found["seconds"].items())
        print(f"{self.master}: {steps}")
        return found


def test_the_pipeline_on_the_cluster_equals_local_and_runs_on_both_executors(
    cluster: dict[str, str], tmp_path: Path
) -> None:
    topic = new_topic("cluster")
    on_cluster = lakehouse(cluster, "cluster", topic)
    settings: Settings = load_settings("cluster", on_cluster)
    start, this_hour = produce_closed_hours(settings, topic, tmp_path / "ledger.jsonl")
    assert _replicas(settings, topic) == {len(CLUSTER.kafka_ports)}, "a replica on every broker"

    # The tests turn drivers' web UIs off (infra/test_env.py); its REST API is the witness here.
    with_ui = {
        **on_cluster,
        "TRIBUTARY__SPARK__CONF__spark.ui.enabled": "true",
        "TRIBUTARY__SPARK__CONF__spark.ui.port": str(DRIVER_UI_PORT),
    }
    local_env = {**lakehouse(cluster, "local", topic), "TRIBUTARY__SPARK__MASTER": "local[2]"}
    # Side by side: each driver spends much of its time waiting (on commits, on MinIO, on
    # tasks' round trips), and the two lakehouses, writer locks and drivers are separate.
    pipelines = [
        start_pipeline(with_ui, tmp_path / "cluster.json", start, this_hour),
        start_pipeline(local_env, tmp_path / "local.json", start, this_hour),
    ]
    try:
        cluster_run, local_run = (p.finish() for p in pipelines)
    finally:
        for p in pipelines:
            if p.proc.poll() is None:
                p.proc.kill()

    assert cluster_run["master"] == MASTER and local_run["master"] == "local[2]"
    assert cluster_run["statuses"] == local_run["statuses"], "a job ended otherwise"
    for name, rows in local_run["tables"].items():
        assert rows, f"{name}: the local run wrote no rows"
        assert cluster_run["tables"][name] == rows, f"{name} differs between cluster and local[2]"

    # From Spark's REST API: the executors that ran this application's tasks.
    executors = [e for e in cluster_run["executors"] if e["id"] != "driver"]
    assert len(executors) == len(CLUSTER.spark_worker_ports), executors
    idle = [e["id"] for e in executors if e["completedTasks"] == 0]
    assert not idle, f"executors {idle} ran no task: {executors}"
    # And from the master: the application held a core on each worker.
    apps = [
        a for a in cluster_run["master_state"]["activeapps"] if a["id"] == cluster_run["app_id"]
    ]
    assert apps and apps[0]["cores"] == len(CLUSTER.spark_worker_ports), apps
    busy = [w for w in cluster_run["master_state"]["workers"] if w["coresused"] > 0]
    assert len(busy) == len(CLUSTER.spark_worker_ports), cluster_run["master_state"]["workers"]


def _replicas(settings: Settings, topic: str) -> set[int]:
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=settings.kafka.bootstrap_servers)
    try:
        described = admin.describe_topics([topic])[0]
    finally:
        admin.close()
    return {len(p["replica_nodes"]) for p in described["partitions"]}


def test_the_partition_leader_killed_under_load_loses_nothing_and_doubles_nothing(
    cluster: dict[str, str], tmp_path: Path
) -> None:
    """kill -9 of the broker leading a partition while events are produced to it (acks=all,
    idempotent) and the speed layer reads it; restarted 5 s later. The recovery time (the kill
    to the first batch that read the partition past where it stood then) is printed for
    docs/cluster.md (pytest -s)."""
    from infra.services.base import Context
    from infra.services.kafka_cluster import KafkaCluster
    from lakehouse.core.kafka_offsets import end_offsets
    from lakehouse.core.paths import state_dir

    topic = new_topic("leader-kill")
    # The fault is the log's: the driver alone runs the stream.
    env = {**lakehouse(cluster, "leader-kill", topic), "TRIBUTARY__SPARK__MASTER": "local[2]"}
    with UnderLoad(env, tmp_path) as run:
        brokers = KafkaCluster(Context(run.settings, state_dir(env)))
        partition, leader = leader_of(run.settings, topic)
        at_kill = end_offsets(run.settings, topic)[partition]
        pid = brokers.proc(f"kafka-{leader}").pid()
        assert pid is not None, f"broker {leader} is not running"
        os.killpg(pid, signal.SIGKILL)
        killed_at = datetime.now(UTC)
        try:
            time.sleep(5)
        finally:
            brokers.restart_node(leader)
        run.catch_up()
        run.stop()
    progress = run.each_event_once()
    past = [r["processed_at"] for r in progress if r["offsets"].get(partition, 0) > at_kill]
    recovery = (min(t for t in past if t > killed_at) - killed_at).total_seconds()
    print(f"leader kill: broker {leader} (partition {partition}); recovered in {recovery:.1f} s")


def test_an_executor_then_a_worker_killed_mid_stream_lose_nothing_and_double_nothing(
    cluster: dict[str, str], tmp_path: Path
) -> None:
    """kill -9 of one of the stream's two executors on the cluster while events arrive: its
    tasks run again elsewhere, the master starts a new executor on a worker with a free core,
    and the stream goes on. Then kill -9 of a worker running one of its executors (which
    follows it) and the worker started again 5 s later: the master gives the stream its lost
    core again and lists the worker alive. The driver's REST API names both
    executors lost; the recovery times (a kill to the first batch committed after it) are
    printed for docs/cluster.md (pytest -s). Then a batch run beside the stream gets a core
    on each worker from the master and reads bronze on them."""
    from infra.services.base import Context
    from infra.services.spark_cluster import SparkCluster
    from lakehouse.core.paths import state_dir

    topic = new_topic("executor-kill")
    rest = f"http://{HOST}:{DRIVER_UI_PORT}/api/v1/applications"
    env = {
        **lakehouse(cluster, "executor-kill", topic),
        "TRIBUTARY__SPARK__CONF__spark.ui.enabled": "true",
        "TRIBUTARY__SPARK__CONF__spark.ui.port": str(DRIVER_UI_PORT),
    }

    # Events go on arriving through both faults.
    with UnderLoad(env, tmp_path, count=5000) as run:
        [app] = [a["id"] for a in read_json(rest)]
        executors = subprocess.run(
            ["pgrep", "-f", f"CoarseGrainedExecutorBackend.*{app}"],
            capture_output=True,
            text=True,
        ).stdout.split()
        assert len(executors) == len(CLUSTER.spark_worker_ports), executors
        os.kill(int(executors[0]), signal.SIGKILL)
        executor_killed_at = datetime.now(UTC)
        wait_for(lambda: newest_batch(run.settings) > executor_killed_at, 300, "a batch after it")

        spark = SparkCluster(Context(run.settings, state_dir(env)))
        # The replacement executor went to a worker with a free core: either of them.
        number = workers_running(app)[0]
        pid = spark.proc(f"spark-worker-{number}").pid()
        assert pid is not None, f"worker {number} is not running"
        os.kill(pid, signal.SIGKILL)  # the worker's JVM alone: its executor sees it gone
        worker_killed_at = datetime.now(UTC)
        try:
            time.sleep(5)
        finally:
            spark.restart_worker(number)

        def executors_seen() -> list[dict[str, Any]]:
            return [e for e in read_json(f"{rest}/{app}/allexecutors") if e["id"] != "driver"]

        def active() -> list[dict[str, Any]]:
            return [e for e in executors_seen() if e["isActive"]]

        # The master gives the stream its lost core back, on a worker with one free, and the
        # executor it starts there registers with the driver; the restarted worker is alive.
        wait_for(lambda: len(active()) == len(CLUSTER.spark_worker_ports), 300, "a new executor")
        assert holds_its_cores(spark, app), spark.state()
        run.catch_up()
        seen = executors_seen()
        # The stream keeps its cores for its life: a batch run, as Airflow starts one beside
        # it, must get executors of its own (spark.cores.max) rather than wait forever.
        assert batch_cores_beside(env, spark, app, run.cfg) == len(CLUSTER.spark_worker_ports)
        run.stop()
    lost = [e for e in seen if not e["isActive"]]
    assert len(lost) == 2, seen
    progress = run.each_event_once()
    for what, killed_at in (("executor", executor_killed_at), ("worker", worker_killed_at)):
        after = min(r["processed_at"] for r in progress if r["processed_at"] > killed_at)
        print(f"{what} kill: recovered in {(after - killed_at).total_seconds():.1f} s")
    print("lost: " + "; ".join(f"{e['id']} {e['removeReason']!r}" for e in lost))


def batch_cores_beside(
    env: dict[str, str], spark: Any, stream_app: str, events: GeneratorConfig
) -> int:
    """jobs.batch_layer on the cluster, run while the stream `stream_app` holds its cores, over
    an hour before any of the stream's `events` (the late ones included): its executors read
    bronze and find no event there, so it ends with nothing to do (a whole recompute on the
    cluster is the equality test's). The most cores the master gave the batch run."""
    end = (events.start - events.late_max - timedelta(minutes=1)).replace(second=0, microsecond=0)
    argv = ["--start", (end - timedelta(hours=1)).isoformat(), "--end", end.isoformat()]
    # Its output to a file: a pipe nobody reads while it runs would stop it once full.
    log = tempfile.TemporaryFile("w+")  # noqa: SIM115 (closed below)
    job = subprocess.Popen(
        [sys.executable, "-m", "jobs.batch_layer", *argv],
        env=env,
        cwd=REPO_ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
    )
    began = time.monotonic()
    most, apps, deadline = 0, [], began + 300
    while job.poll() is None and time.monotonic() < deadline:
        apps = (spark.state() or {}).get("activeapps", [])
        if any(a["id"] == stream_app and a["cores"] > 0 for a in apps):
            batch = [a["cores"] for a in apps if a["name"] == "tributary-batch_layer"]
            most = max([most, *batch])
        time.sleep(1)
    if job.poll() is None:
        job.kill()
    job.wait()
    with log:
        log.seek(0)
        said = log.read()
    assert job.returncode == Exit.NOTHING_TO_DO and "no accepted event in" in said, (
        f"the batch run beside the stream exited {job.returncode} (cores it got: {most}; "
        f"the master's applications: {apps}):\n{said[-3000:]}"
    )
    print(f"a batch run beside the stream: {most} cores, {time.monotonic() - began:.0f} s")
    return most


def test_a_minio_drive_lost_during_writes_and_restored_loses_nothing(
    cluster: dict[str, str], tmp_path: Path
) -> None:
    """One of the 4 erasure-coded drives made unusable (its folder moved away, a file in its
    place) while the stream writes its tables to MinIO, then put back: MinIO reports the drive
    lost, writes and reads go on with 3 drives, the drive is reported back, and nothing the
    stream wrote is lost or doubled."""
    from infra.services.base import Context
    from infra.services.minio_cluster import MinioCluster
    from lakehouse.core.paths import state_dir

    topic = new_topic("drive-loss")
    env = {**lakehouse(cluster, "drive-loss", topic), "TRIBUTARY__SPARK__MASTER": "local[2]"}
    with UnderLoad(env, tmp_path) as run:
        drive = Path(MinioCluster(Context(run.settings, state_dir(env))).drives()[0])
        away = drive.with_name(f"{drive.name}.away")
        drive.rename(away)
        try:
            drive.write_bytes(b"")  # a file where the drive's folder was: MinIO cannot use it
            wait_for(lambda: drive_states(run.settings)[drive.name] != "ok", 30, "the drive lost")
            lost_at = datetime.now(UTC)
            wait_for(lambda: newest_batch(run.settings) > lost_at, 300, "a batch on 3 drives")
        finally:
            if drive.is_file():
                drive.unlink()
            away.rename(drive)
        back_at = datetime.now(UTC)
        wait_for(lambda: set(drive_states(run.settings).values()) == {"ok"}, 60, "the drive back")
        run.catch_up()
        run.stop()
    progress = run.each_event_once()
    assert [r for r in progress if lost_at < r["processed_at"] < back_at], "none while lost"


def test_minio_stopped_for_60_s_during_a_batch_run_is_waited_out_and_a_longer_loss_fails_clearly(
    cluster: dict[str, str], tmp_path: Path
) -> None:
    """MinIO stopped a few seconds into a batch run and started 60 s later: Spark's S3 client
    retries, the job says storage is away and back, and the run completes. With its retries
    cut to one attempt, the same outage fails the run: exit 5 with one line saying what
    happened and what to do, no traceback, every table at the version it had, the run not
    recorded. (That a run failed mid-write and run again completes is
    tests/integration/test_batch_layer.py's: no storage outage is needed for it.)"""
    from infra.services.base import Context
    from lakehouse.core.paths import state_dir
    from lakehouse.core.small_tables import table_rows, table_version
    from lakehouse.core.tables import BATCH, TABLES

    topic = new_topic("minio-outage")
    env = {**lakehouse(cluster, "minio-outage", topic), "TRIBUTARY__SPARK__MASTER": "local[2]"}
    settings = load_settings("cluster", env)
    start, end = produce_closed_hours(settings, topic, tmp_path / "ledger.jsonl")
    job(env, "speed_layer", "--available-now")  # bronze
    minio = MinioCluster(Context(settings, state_dir(env)))
    first, second = (start, start + timedelta(hours=1)), (start + timedelta(hours=1), end)
    batch_tables = [t for t in TABLES.values() if t.writer == BATCH]

    def state() -> dict[str, Any]:
        return {t.name: (table_version(settings, t), table_rows(settings, t)) for t in batch_tables}

    status, said = batch_with_outage(env, first, minio, 60, tmp_path / "first.log")
    assert status == 0, said
    assert "is not answering" in said and "answers again" in said, said
    before = state()
    recorded = {(r["run_id"], r["interval_start"]) for r in before["ops.batch_runs"][1]}
    assert [start for _, start in recorded] == [first[0]], recorded

    no_retries = {
        **env,
        "TRIBUTARY__SPARK__CONF__spark.hadoop.fs.s3a.retry.limit": "0",
        "TRIBUTARY__SPARK__CONF__spark.hadoop.fs.s3a.attempts.maximum": "1",
    }
    status, said = batch_with_outage(no_retries, second, minio, None, tmp_path / "second.log")
    assert status == Exit.FAILED, said
    assert "object storage at " in said and "stopped answering during the run" in said, said
    assert "Traceback" not in said and "Py4J" not in said and "\tat " not in said, said
    assert state() == before, "a table changed, or the failed run was recorded"


def job(env: dict[str, str], name: str, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", f"jobs.{name}", *args],
        env=env,
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert done.returncode == 0, f"jobs.{name} exited {done.returncode}:\n{done.stderr[-3000:]}"
    return done.stdout


def batch_with_outage(
    env: dict[str, str],
    interval: tuple[datetime, datetime],
    minio: MinioCluster,
    away: float | None,
    log: Path,
) -> tuple[int, str]:
    """jobs.batch_layer over `interval` (forced), MinIO stopped 3 s after the job says it
    starts recomputing and started again `away` seconds later (None: once the job has ended);
    its exit status and all it said."""
    argv = ["--start", interval[0].isoformat(), "--end", interval[1].isoformat(), "--force"]
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "jobs.batch_layer", *argv],
            env=env,
            cwd=REPO_ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_for(lambda: "recomputing" in log.read_text(), 120, "the batch run to start")
        time.sleep(3)
        minio.stop()
        try:
            if away is None:
                proc.wait(timeout=600)
            else:
                time.sleep(away)
        finally:
            minio.start()
        return proc.wait(timeout=600), log.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
