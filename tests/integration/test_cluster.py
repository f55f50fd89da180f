"""The pipeline on a real cluster on loopback (docs/cluster.md): a Spark standalone master with
two workers, three KRaft brokers and a 4-drive erasure-coded MinIO, started by the code
`make cluster-up` runs (python -m infra.services up spark-cluster kafka-cluster minio-cluster)
on ports of this test environment's own (the cluster's defaults plus the test port offset),
and stopped at the end.

The same events, in a topic replicated on the three brokers, go through the speed layer and
the batch layer twice: once on spark://127.0.0.1:<port>, once on local[2], each into its own
lakehouse on the cluster's MinIO; every view and table they wrote must be identical. That the
work was spread is read from Spark itself: the driver's REST API must list two executors that
both ran tasks, and the master must have given the application both workers.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any

import pytest

from infra import test_env
from lakehouse.core.config import ClusterSettings, Settings, load_settings
from lakehouse.core.paths import REPO_ROOT
from lakehouse.generator.clickstream import ANOMALY_PRESETS, GeneratorConfig, produce
from tests.conftest import RUN_ID, new_topic

HOST = test_env.HOST
EVENTS = 2000
HOURS = 2
# As `make cluster-up` names them (CLUSTER_SERVICES).
SERVICES = ["kafka-cluster", "minio-cluster", "spark-cluster"]


def cluster_ports(offset: int) -> ClusterSettings:
    """The cluster's default ports moved by the test port offset, as every test service is."""
    d = ClusterSettings()
    return d.model_copy(
        update={
            "spark_master_port": d.spark_master_port + offset,
            "spark_master_web_port": d.spark_master_web_port + offset,
            "spark_worker_ports": tuple(p + offset for p in d.spark_worker_ports),
            "spark_worker_web_ports": tuple(p + offset for p in d.spark_worker_web_ports),
            "kafka_ports": tuple(p + offset for p in d.kafka_ports),
            "kafka_controller_ports": tuple(p + offset for p in d.kafka_controller_ports),
            "minio_port": d.minio_port + offset,
            "minio_console_port": d.minio_console_port + offset,
        }
    )


CLUSTER = cluster_ports(test_env.port_offset())
MASTER = f"spark://{HOST}:{CLUSTER.spark_master_port}"
MASTER_WEB = f"http://{HOST}:{CLUSTER.spark_master_web_port}"
DRIVER_UI_PORT = 4040 + test_env.port_offset()


def cluster_environment() -> dict[str, str]:
    """The test services' environment with the cluster profile pointed at this cluster."""
    cluster = {
        f"TRIBUTARY__CLUSTER__{key.upper()}": json.dumps(list(value))
        if isinstance(value, tuple)
        else str(value)
        for key, value in CLUSTER.model_dump().items()
        if key.endswith(("port", "ports"))
    }
    return {
        **test_env.environ(),
        **cluster,
        "TRIBUTARY_PROFILE": "cluster",
        "TRIBUTARY__KAFKA__BOOTSTRAP_SERVERS": ",".join(f"{HOST}:{p}" for p in CLUSTER.kafka_ports),
        "TRIBUTARY__S3__ENDPOINT": f"http://{HOST}:{CLUSTER.minio_port}",
        "TRIBUTARY__SPARK__MASTER": MASTER,
        # Both runs: a post-shuffle task for each executor.
        "TRIBUTARY__SPARK__CONF__spark.sql.shuffle.partitions": "2",
        # The executors live for one run, as the test drivers do: C1 only (infra/test_env.py).
        "TRIBUTARY__SPARK__CONF__spark.executor.extraJavaOptions": (
            f"-XX:+UseParallelGC {test_env.TEST_JAVA_OPTIONS}"
        ),
    }


def services(command: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "infra.services", *command],
        env=env,
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=400,
    )


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """The cluster, up and healthy, for this module; stopped after (only what it started)."""
    env = cluster_environment()
    record = tmp_path_factory.mktemp("cluster") / "started"
    up = services(["up", *SERVICES, "--record", str(record)], env)
    try:
        if up.returncode != 0:
            pytest.fail(
                f"the loopback cluster did not start (`python -m infra.services up "
                f"{' '.join(SERVICES)}` exited {up.returncode}):\n{up.stdout[-2000:]}"
                f"\n{up.stderr[-3000:]}"
            )
        yield env
    finally:
        _delete_leftovers(env)
        down = services(["down", "--only-recorded", str(record)], env)
        assert down.returncode == 0, down.stderr


def _delete_leftovers(env: dict[str, str]) -> None:
    from lakehouse.core.kafka_io import delete_topics
    from lakehouse.core.processes import http_ok, port_open
    from lakehouse.core.storage import delete_prefix

    settings = load_settings("cluster", env)
    if http_ok(f"{settings.s3.endpoint}/minio/health/live"):
        delete_prefix(settings, f"tests/{RUN_ID}/")
    if port_open(HOST, CLUSTER.kafka_ports[0]):
        delete_topics(settings, f"test-{RUN_ID}-")


def lakehouse(env: dict[str, str], name: str, topic: str) -> dict[str, str]:
    return {
        **env,
        "TRIBUTARY__STORAGE__ROOT": f"s3a://tributary/tests/{RUN_ID}/{name}/lakehouse",
        "TRIBUTARY__STORAGE__CHECKPOINTS": f"s3a://tributary/tests/{RUN_ID}/{name}/checkpoints",
        "TRIBUTARY__KAFKA__TOPIC": topic,
        # Two micro-batches: the first one moves the watermark, some events of the second one
        # are behind it (late). Each batch costs its commits to a dozen tables.
        "TRIBUTARY__SPEED__MAX_OFFSETS_PER_TRIGGER": "1200",
    }


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
            status = self.proc.wait(timeout=600)
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
    this_hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    start = this_hour - HOURS * timedelta(hours=1)
    on_cluster = lakehouse(cluster, "cluster", topic)
    settings: Settings = load_settings("cluster", on_cluster)
    seconds = (datetime.now(UTC) - start).total_seconds()
    cfg = GeneratorConfig(
        count=EVENTS,
        seed=33,
        start=start,
        rate=EVENTS / seconds,
        users=25,
        **ANOMALY_PRESETS["all"],
    )
    produce(settings, cfg, tmp_path / "ledger.jsonl", topic=topic)
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
