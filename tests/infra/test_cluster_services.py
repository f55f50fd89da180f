"""The loopback cluster's services (make cluster-up) refuse a port in use with the setting to
change, form one Kafka quorum replicating every topic on all brokers, and are never started by
a plain `make up`."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from infra.services.base import Context, Service
from infra.services.kafka_cluster import KafkaCluster
from infra.services.minio_cluster import MinioCluster
from infra.services.spark_cluster import SparkCluster
from lakehouse.core.config import load_settings
from lakehouse.core.processes import ServiceError
from lakehouse.core.secrets import ensure_secrets


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A port some other program is listening on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def context(tmp_path: Path, **cluster: str) -> Context:
    env = {**os.environ, "TRIBUTARY_STATE": str(tmp_path / "state")}
    env.update({f"TRIBUTARY__CLUSTER__{k.upper()}": v for k, v in cluster.items()})
    ensure_secrets(env)
    settings = load_settings(profile="cluster", environ=env)
    return Context(settings=settings, state=tmp_path / "state")


@pytest.mark.parametrize(
    ("service", "setting", "value"),
    [
        (KafkaCluster, "kafka_ports", "[{port}, 1, 2]"),
        (MinioCluster, "minio_port", "{port}"),
        (SparkCluster, "spark_master_port", "{port}"),
    ],
)
def test_a_port_in_use_is_refused_with_the_setting_to_change(
    tmp_path: Path, busy_port: int, service: type[Service], setting: str, value: str
) -> None:
    svc = service(context(tmp_path, **{setting: value.format(port=busy_port)}))
    with pytest.raises(ServiceError) as caught:
        svc.start()
    message = str(caught.value)
    assert f"127.0.0.1:{busy_port} is already in use" in message
    assert f"TRIBUTARY__CLUSTER__{setting.upper()}" in message
    assert not svc.running()


def test_the_kafka_nodes_are_one_quorum_replicating_every_topic_on_all(tmp_path: Path) -> None:
    kafka = KafkaCluster(context(tmp_path))
    props = []
    for node, _, _ in kafka.nodes:
        text = Path(kafka._write_properties(node)).read_text()
        props.append(dict(line.split("=", 1) for line in text.splitlines() if "=" in line))
    assert [p["node.id"] for p in props] == ["1", "2", "3"]
    assert {p["controller.quorum.voters"] for p in props} == {
        "1@127.0.0.1:9195,2@127.0.0.1:9196,3@127.0.0.1:9197"
    }
    assert {p["listeners"].split(",")[0] for p in props} == {
        f"PLAINTEXT://127.0.0.1:{port}" for port in (9192, 9193, 9194)
    }
    for key in ("default.replication.factor", "offsets.topic.replication.factor"):
        assert {p[key] for p in props} == {"3"}, key
    for key in ("min.insync.replicas", "transaction.state.log.min.isr"):
        assert {p[key] for p in props} == {"2"}, key
    assert len({p["log.dirs"] for p in props}) == 3, "a log folder each"


def test_minio_has_four_drives_and_the_spark_cluster_two_workers(tmp_path: Path) -> None:
    ctx = context(tmp_path)
    assert len(MinioCluster(ctx).drives()) == 4
    assert [p.name for p in SparkCluster(ctx).procs()] == [
        "spark-master",
        "spark-worker-1",
        "spark-worker-2",
    ]


def test_a_plain_up_never_starts_the_cluster() -> None:
    from infra.services.__main__ import CLUSTER, ORDER, services

    names = [svc.name for svc in services([])]
    assert names == list(ORDER)
    assert not set(names) & set(CLUSTER)
    assert [svc.name for svc in services(list(CLUSTER))] == list(CLUSTER)


def test_airflow_started_with_the_cluster_profile_runs_its_jobs_on_the_cluster(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`TRIBUTARY_PROFILE=cluster python -m infra.services up postgres airflow`
    (docs/cluster.md): every task gets the profile, so the jobs it runs find the Spark master,
    the brokers and the MinIO that `make cluster-up` starts."""
    from infra.services.airflow import Airflow

    for name in [n for n in os.environ if n.startswith("TRIBUTARY")]:
        monkeypatch.delenv(name)  # the test services' own addresses, under make test
    monkeypatch.setenv("TRIBUTARY_STATE", str(tmp_path / "state"))
    ensure_secrets(os.environ)
    ctx = Context(settings=load_settings(profile="cluster"), state=tmp_path / "state")
    tasks = Airflow(ctx).env()
    assert tasks["TRIBUTARY_PROFILE"] == "cluster"
    job = load_settings(environ=tasks)
    assert job.spark.master == SparkCluster(ctx).address()
    assert job.kafka.bootstrap_servers == KafkaCluster(ctx).address()
    assert job.s3.endpoint == MinioCluster(ctx).address()


def test_the_workers_have_room_for_every_stream_and_a_batch_run_beside_them(
    tmp_path: Path,
) -> None:
    """A stream holds its cores for its life: the workers `make cluster-up` starts offer
    spark.cores.max cores (and an executor's memory for each) to each of the five streams the
    DAGs keep running and to a batch run beside them. Without the cap, the first stream takes
    every core and the batch_layer DAG's run waits for an executor forever."""
    from lakehouse.cdc.supervisor import changelog_stream
    from lakehouse.commerce.supervisor import commerce_stream
    from lakehouse.core.config import jvm_size_bytes
    from lakehouse.joins.supervisor import enrichment_stream
    from lakehouse.joins.windowed_supervisor import stream_joins_stream
    from lakehouse.speed.supervisor import speed_layer_stream

    streams = {
        s().module
        for s in (
            speed_layer_stream,
            commerce_stream,
            enrichment_stream,
            stream_joins_stream,
            changelog_stream,
        )
    }
    settings = context(tmp_path).settings
    per_app = int(settings.spark.conf["spark.cores.max"])
    workers = len(settings.cluster.spark_worker_ports)
    assert per_app == workers, "one executor on each worker"
    cores = workers * settings.cluster.spark_worker_cores
    assert cores >= per_app * (len(streams) + 1)
    executor = jvm_size_bytes(settings.spark.conf["spark.executor.memory"])
    memory = jvm_size_bytes(settings.cluster.spark_worker_memory)
    assert memory >= executor * settings.cluster.spark_worker_cores
