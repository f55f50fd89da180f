"""The loopback cluster's Kafka: one KRaft node per configured port, each a broker and a
controller, the controllers a quorum of all of them; topics get a replica on every broker and
need a majority of them in sync (infra/kafka/cluster.properties)."""

from __future__ import annotations

import os
import subprocess

from infra.bootstrap import java_home
from infra.services.base import Service
from infra.services.kafka import kept_cluster_id
from lakehouse.core.paths import REPO_ROOT, kafka_jars_dir
from lakehouse.core.processes import Proc, ServiceError, port_open, require_free_port, wait_until

TEMPLATE = REPO_ROOT / "infra" / "kafka" / "cluster.properties"
LOG4J = REPO_ROOT / "infra" / "kafka" / "log4j2.properties"


class KafkaCluster(Service):
    name = "kafka-cluster"

    @property
    def nodes(self) -> list[tuple[int, int, int]]:
        """(node id, broker port, controller port) of each node."""
        c = self.ctx.settings.cluster
        pairs = zip(c.kafka_ports, c.kafka_controller_ports, strict=True)
        return [(i, port, controller) for i, (port, controller) in enumerate(pairs, start=1)]

    def procs(self) -> list[Proc]:
        return [self.proc(f"kafka-{node}") for node, _, _ in self.nodes]

    def address(self) -> str:
        host = self.ctx.settings.services.bind_host
        return ",".join(f"{host}:{port}" for _, port, _ in self.nodes)

    def stop(self) -> bool:
        """All nodes at once: a node stopped alone first moves its partitions' leadership to
        the others, and the last ones, their controller quorum gone, would wait out their
        shutdown timeout."""
        from concurrent.futures import ThreadPoolExecutor

        procs = self.procs()
        with ThreadPoolExecutor(len(procs)) as pool:
            return any(list(pool.map(lambda proc: proc.stop(), procs)))

    def healthy(self) -> bool:
        """Every broker answers and the cluster's metadata lists all of them."""
        host = self.ctx.settings.services.bind_host
        if not all(port_open(host, port) for _, port, _ in self.nodes):
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
            brokers = admin.describe_cluster().get("brokers") or []
            return len(brokers) == len(self.nodes)
        except not_ready:
            return False
        finally:
            admin.close()

    def start(self) -> None:
        settings = self.ctx.settings
        host = settings.services.bind_host
        jars = kafka_jars_dir()
        if not (jars / ".complete").exists():
            raise ServiceError(f"kafka-cluster: broker jars missing from {jars}; run `make setup`")
        for _, port, controller in self.nodes:
            require_free_port("kafka-cluster", host, port, "TRIBUTARY__CLUSTER__KAFKA_PORTS")
            require_free_port(
                "kafka-cluster", host, controller, "TRIBUTARY__CLUSTER__KAFKA_CONTROLLER_PORTS"
            )
        # All nodes first, then the wait: a controller quorum elects a leader only once a
        # majority of its voters runs.
        started = [self._start_node(node) for node, _, _ in self.nodes]
        for proc in started:
            self._wait_healthy(proc)

    def restart_node(self, node: int) -> None:
        """Start one node that stopped (or was killed) while the others run, and wait until
        the cluster lists every broker again: its log folder is kept, so it rejoins as the
        same broker and catches its replicas up."""
        proc = self.proc(f"kafka-{node}")
        if proc.pid() is not None:
            raise ServiceError(f"kafka-cluster: node {node} is running (pid {proc.pid()})")
        _, port, controller = self.nodes[node - 1]
        host = self.ctx.settings.services.bind_host
        require_free_port("kafka-cluster", host, port, "TRIBUTARY__CLUSTER__KAFKA_PORTS")
        require_free_port(
            "kafka-cluster", host, controller, "TRIBUTARY__CLUSTER__KAFKA_CONTROLLER_PORTS"
        )
        self._wait_healthy(self._start_node(node))

    def _start_node(self, node: int) -> Proc:
        logs = self.ctx.run_dir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        jvm = [
            str(java_home() / "bin" / "java"),
            f"-Dlog4j2.configurationFile={LOG4J}",
            f"-Dkafka.logs.dir={logs}",
            "-cp",
            f"{kafka_jars_dir()}/*",
        ]
        props = self._write_properties(node)
        if not (self.data / f"node-{node}" / "data" / "meta.properties").exists():
            self._format(jvm, props, self._cluster_id(), node)
        proc = self.proc(f"kafka-{node}")
        proc.start(
            [
                jvm[0],
                "-Xms128m",
                f"-Xmx{self.ctx.settings.cluster.kafka_heap}",
                "-XX:+UseG1GC",
                "-XX:TieredStopAtLevel=1",
                "-Djava.awt.headless=true",
                *jvm[1:],
                "kafka.Kafka",
                props,
            ],
            env=os.environ,
        )
        return proc

    def _wait_healthy(self, proc: Proc) -> None:
        wait_until(
            self.healthy,
            timeout=120,
            what=f"waiting for the {len(self.nodes)} Kafka brokers ({proc.name})",
            proc=proc,
            every=2,
        )

    def _write_properties(self, node: int) -> str:
        host = self.ctx.settings.services.bind_host
        folder = self.data / f"node-{node}"
        folder.mkdir(parents=True, exist_ok=True)
        _, port, controller = self.nodes[node - 1]
        replicas = len(self.nodes)
        text = TEMPLATE.read_text().format(
            host=host,
            node_id=node,
            port=port,
            controller_port=controller,
            voters=",".join(f"{n}@{host}:{c}" for n, _, c in self.nodes),
            data_dir=folder / "data",
            replicas=replicas,
            # A majority: with 3 replicas, 2 (one broker may be down and writes go on).
            min_isr=replicas // 2 + 1,
        )
        path = folder / "server.properties"
        path.write_text(text)
        return str(path)

    def _cluster_id(self) -> str:
        """One id for every node of the cluster, kept beside their folders."""
        return kept_cluster_id(self.data)

    def _format(self, jvm: list[str], props: str, cluster_id: str, node: int) -> None:
        print(f"    formatting the log folder of Kafka node {node}", flush=True)
        result = subprocess.run(
            [
                *jvm,
                "kafka.tools.StorageTool",
                "format",
                "--ignore-formatted",
                f"--cluster-id={cluster_id}",
                "-c",
                props,
            ],
            capture_output=True,
            text=True,
        )
        if result.returncode != 0:
            raise ServiceError(
                f"kafka-cluster: formatting node {node}'s log folder failed: "
                + (result.stderr or result.stdout).strip().splitlines()[-1]
            )
