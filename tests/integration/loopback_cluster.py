"""The loopback cluster the cluster tests run on (tests/integration/test_cluster.py): a Spark
standalone master with two workers, three KRaft brokers and a 4-drive erasure-coded MinIO,
started by the code `make cluster-up` runs on ports of this test environment's own (the
cluster's defaults plus the test port offset); the environment that points a job at it, and
what the tests read back from its services."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from infra import test_env
from lakehouse.core.config import ClusterSettings, Settings, load_settings
from lakehouse.core.paths import REPO_ROOT
from lakehouse.generator.clickstream import preset_config, produce
from tests.conftest import RUN_ID
from tests.integration.service_json import read_json

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


def drive_states(settings: Settings) -> dict[str, str]:
    """Each MinIO drive's folder name and state ("ok" when in use), from its admin API."""
    from urllib.parse import urlparse

    from minio.credentials import StaticProvider
    from minio.minioadmin import MinioAdmin

    s3 = settings.s3
    assert s3.access_key is not None and s3.secret_key is not None
    admin = MinioAdmin(
        endpoint=urlparse(s3.endpoint).netloc,
        credentials=StaticProvider(
            s3.access_key.get_secret_value(), s3.secret_key.get_secret_value()
        ),
        secure=False,
    )
    info = json.loads(admin.info())
    return {
        Path(d["path"]).name: d.get("state", "")
        for server in info["servers"]
        for d in server.get("drives", [])
    }


def leader_of(settings: Settings, topic: str) -> tuple[int, int]:
    """(partition 0, the node id of the broker leading it)."""
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=settings.kafka.bootstrap_servers)
    try:
        [described] = admin.describe_topics([topic])
    finally:
        admin.close()
    [first] = [p for p in described["partitions"] if p["partition_index"] == 0]
    return 0, int(first["leader_id"])


def holds_its_cores(spark: Any, app: str) -> bool:
    """The master lists every worker alive and `app` holding its spark.cores.max, one core
    for each worker (config/cluster.yaml)."""
    state = spark.state() or {}
    alive = [w for w in state.get("workers", []) if w["state"] == "ALIVE"]
    apps = [a for a in state.get("activeapps", []) if a["id"] == app]
    return (
        len(alive) == len(CLUSTER.spark_worker_ports)
        and bool(apps)
        and apps[0]["cores"] == len(CLUSTER.spark_worker_ports)
    )


def workers_running(app: str) -> list[int]:
    """The workers (numbered from 1) running an executor of `app`, from their own /json/."""
    found = []
    for number, port in enumerate(CLUSTER.spark_worker_web_ports, start=1):
        state = read_json(f"http://{HOST}:{port}/json/")
        if any(e["appid"] == app for e in state.get("executors", [])):
            found.append(number)
    return found


def produce_closed_hours(settings: Settings, topic: str, ledger: Path) -> tuple[datetime, datetime]:
    """EVENTS events with every anomaly, spread over the HOURS closed hours before this one,
    sent to `topic`; those hours' (start, end)."""
    end = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    start = end - HOURS * timedelta(hours=1)
    cfg = preset_config(
        "all",
        {},
        count=EVENTS,
        seed=33,
        start=start,
        rate=EVENTS / (datetime.now(UTC) - start).total_seconds(),
        users=25,
    )
    produce(settings, cfg, ledger, topic=topic)
    return start, end
