"""Apache Kafka in KRaft mode (one combined broker+controller), from the Maven jars."""

from __future__ import annotations

import base64
import os
import uuid
from pathlib import Path

from infra.bootstrap import java_home
from infra.services.base import Service
from lakehouse.core.paths import REPO_ROOT, kafka_jars_dir
from lakehouse.core.processes import Proc, ServiceError, port_open, require_free_port, wait_until

TEMPLATE = REPO_ROOT / "infra" / "kafka" / "server.properties"
LOG4J = REPO_ROOT / "infra" / "kafka" / "log4j2.properties"


def kept_cluster_id(folder: Path) -> str:
    """The cluster id kept in `folder`/cluster.id, made there the first time."""
    folder.mkdir(parents=True, exist_ok=True)
    cluster_file = folder / "cluster.id"
    if not cluster_file.exists():
        cluster_file.write_text(new_cluster_id())
    return cluster_file.read_text().strip()


def new_cluster_id() -> str:
    """A new KRaft cluster id: a UUID in URL-safe base64, 22 characters, as Kafka makes them.
    Never one that begins with "-" (one in 64 would), which a command line takes for an option;
    Kafka's own Uuid.randomUuid draws again for the same reason."""
    while True:
        raw = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not raw.startswith("-"):
            return raw


class Kafka(Service):
    name = "kafka"

    def procs(self) -> list[Proc]:
        return [self.proc("kafka")]

    def address(self) -> str:
        svc = self.ctx.settings.services
        return f"{svc.bind_host}:{svc.kafka_port}"

    def healthy(self) -> bool:
        svc = self.ctx.settings.services
        if not port_open(svc.bind_host, svc.kafka_port):
            return False
        from kafka import KafkaAdminClient
        from kafka.errors import KafkaConnectionError, KafkaTimeoutError

        # Only "not reachable yet" counts as unhealthy; any other error is a bug to see.
        not_ready = (KafkaConnectionError, KafkaTimeoutError, OSError)
        try:
            admin = KafkaAdminClient(bootstrap_servers=self.address(), request_timeout_ms=5000)
        except not_ready:
            return False
        try:
            return bool(admin.describe_cluster().get("brokers"))
        except not_ready:
            return False
        finally:
            admin.close()

    def start(self) -> None:
        svc = self.ctx.settings.services
        jars = kafka_jars_dir()
        if not (jars / ".complete").exists():
            raise ServiceError(f"kafka: broker jars missing from {jars}; run `make setup`")
        for port, setting in (
            (svc.kafka_port, "TRIBUTARY__SERVICES__KAFKA_PORT"),
            (svc.kafka_controller_port, "TRIBUTARY__SERVICES__KAFKA_CONTROLLER_PORT"),
        ):
            require_free_port("kafka", svc.bind_host, port, setting)
        java = str(java_home() / "bin" / "java")
        props = self._write_properties()
        classpath = f"{jars}/*"
        logs = self.ctx.run_dir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        jvm = [
            java,
            f"-Dlog4j2.configurationFile={LOG4J}",
            f"-Dkafka.logs.dir={logs}",
            "-cp",
            classpath,
        ]
        if not (self.data / "data" / "meta.properties").exists():
            self._format(jvm, props)
        proc = self.proc("kafka")
        proc.start(
            [
                *jvm[:1],
                "-Xms128m",
                f"-Xmx{svc.kafka_heap}",
                "-XX:+UseG1GC",
                "-Djava.awt.headless=true",
                *jvm[1:],
                "kafka.Kafka",
                str(props),
            ],
            env=os.environ,
        )
        wait_until(
            self.healthy, timeout=90, what="waiting for the Kafka broker", proc=proc, every=2
        )

    def _write_properties(self) -> str:
        svc = self.ctx.settings.services
        self.data.mkdir(parents=True, exist_ok=True)
        text = TEMPLATE.read_text().format(
            host=svc.bind_host,
            port=svc.kafka_port,
            controller_port=svc.kafka_controller_port,
            data_dir=self.data / "data",
        )
        path = self.data / "server.properties"
        path.write_text(text)
        return str(path)

    def _format(self, jvm: list[str], props: str) -> None:
        import subprocess

        result = subprocess.run(
            [
                *jvm,
                "kafka.tools.StorageTool",
                "format",
                "--ignore-formatted",
                f"--cluster-id={kept_cluster_id(self.data)}",
                "-c",
                props,
            ],
            capture_output=True,
            text=True,
        )
        if result.returncode != 0:
            raise ServiceError(
                "kafka: formatting the log folder failed: "
                + (result.stderr or result.stdout).strip().splitlines()[-1]
            )
