"""A Spark standalone cluster on loopback: one master and its workers, from the venv's pyspark
(its bin/spark-class runs the Master and Worker classes in the foreground)."""

from __future__ import annotations

import json
import os
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from infra.bootstrap import java_home
from infra.services.base import Service
from lakehouse.core.config import ClusterSettings
from lakehouse.core.processes import Proc, ServiceError, require_free_port, wait_until

SETTING = "TRIBUTARY__CLUSTER__"


def spark_class() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "bin" / "spark-class"


class SparkCluster(Service):
    name = "spark-cluster"

    def procs(self) -> list[Proc]:
        workers = len(self.ctx.settings.cluster.spark_worker_ports)
        return [self.proc("spark-master")] + [
            self.proc(f"spark-worker-{i}") for i in range(1, workers + 1)
        ]

    def address(self) -> str:
        return f"spark://{self.ctx.settings.services.bind_host}:{self.cluster.spark_master_port}"

    @property
    def cluster(self) -> ClusterSettings:
        return self.ctx.settings.cluster

    def web_url(self) -> str:
        host = self.ctx.settings.services.bind_host
        return f"http://{host}:{self.cluster.spark_master_web_port}"

    def state(self) -> dict[str, Any] | None:
        """The master's own account of itself (its web UI's /json/), None if it does not answer."""
        try:
            with urllib.request.urlopen(f"{self.web_url()}/json/", timeout=3) as response:
                found: dict[str, Any] = json.load(response)
                return found
        except (urllib.error.URLError, OSError, ValueError):
            return None

    def healthy(self) -> bool:
        # The master is alive and every worker has registered with it, alive.
        state = self.state()
        if state is None or state.get("status") != "ALIVE":
            return False
        alive = [w for w in state.get("workers", []) if w.get("state") == "ALIVE"]
        return len(alive) >= len(self.cluster.spark_worker_ports)

    def start(self) -> None:
        host = self.ctx.settings.services.bind_host
        binary = spark_class()
        if not binary.exists():
            raise ServiceError(f"spark-cluster: {binary} missing; run `make setup`")
        c = self.cluster
        ports = [
            (c.spark_master_port, "SPARK_MASTER_PORT"),
            (c.spark_master_web_port, "SPARK_MASTER_WEB_PORT"),
            *((p, "SPARK_WORKER_PORTS") for p in c.spark_worker_ports),
            *((p, "SPARK_WORKER_WEB_PORTS") for p in c.spark_worker_web_ports),
        ]
        for port, setting in ports:
            require_free_port("spark-cluster", host, port, SETTING + setting)
        master = self.proc("spark-master")
        master.start(
            [
                str(binary),
                "org.apache.spark.deploy.master.Master",
                "--host",
                host,
                "--port",
                str(c.spark_master_port),
                "--webui-port",
                str(c.spark_master_web_port),
            ],
            env=self._env("master"),
        )
        wait_until(
            lambda: self.state() is not None,
            timeout=90,
            what="waiting for the Spark master",
            proc=master,
            every=1,
        )
        workers = [self._start_worker(i) for i in range(1, len(c.spark_worker_ports) + 1)]
        for worker in workers:
            self._wait_registered(worker)

    def restart_worker(self, number: int) -> None:
        """Start worker `number` (from 1) that stopped or was killed while the master runs, and
        wait until the master lists every worker alive again: the master gives it executors
        of the applications that still want cores."""
        proc = self.proc(f"spark-worker-{number}")
        if proc.pid() is not None:
            raise ServiceError(f"spark-cluster: worker {number} is running (pid {proc.pid()})")
        host = self.ctx.settings.services.bind_host
        c = self.cluster
        for port, setting in (
            (c.spark_worker_ports[number - 1], "SPARK_WORKER_PORTS"),
            (c.spark_worker_web_ports[number - 1], "SPARK_WORKER_WEB_PORTS"),
        ):
            require_free_port("spark-cluster", host, port, SETTING + setting)
        self._wait_registered(self._start_worker(number))

    def _start_worker(self, number: int) -> Proc:
        c = self.cluster
        worker = self.proc(f"spark-worker-{number}")
        worker.start(
            [
                str(spark_class()),
                "org.apache.spark.deploy.worker.Worker",
                "--host",
                self.ctx.settings.services.bind_host,
                "--port",
                str(c.spark_worker_ports[number - 1]),
                "--webui-port",
                str(c.spark_worker_web_ports[number - 1]),
                "--cores",
                str(c.spark_worker_cores),
                "--memory",
                c.spark_worker_memory,
                "--work-dir",
                str(self.data / f"worker-{number}"),
                self.address(),
            ],
            env=self._env(f"worker-{number}"),
        )
        return worker

    def _wait_registered(self, worker: Proc) -> None:
        wait_until(
            self.healthy,
            timeout=90,
            what=f"waiting for {worker.name} to register with the master",
            proc=worker,
            every=1,
        )

    def _env(self, role: str) -> dict[str, str]:
        """Each daemon binds to loopback and keeps its logs and scratch space in the state
        folder. Executors inherit the worker's environment: they run Python workers with the
        venv's interpreter (the driver's own PYSPARK_PYTHON, when it sets one, wins)."""
        folder = self.data / role
        (folder / "tmp").mkdir(parents=True, exist_ok=True)
        env = {
            **os.environ,
            "JAVA_HOME": str(java_home()),
            "SPARK_LOCAL_IP": self.ctx.settings.services.bind_host,
            "SPARK_LOCAL_HOSTNAME": self.ctx.settings.services.bind_host,
            "SPARK_LOG_DIR": str(self.ctx.run_dir / "logs"),
            "SPARK_LOCAL_DIRS": str(folder / "tmp"),
            "SPARK_DAEMON_MEMORY": "256m",
            "PYSPARK_PYTHON": sys.executable,
        }
        # A SPARK_HOME of another Spark would run that Spark's classes.
        env.pop("SPARK_HOME", None)
        return env
