"""Kafka Connect in distributed mode with the Debezium PostgreSQL connector, from the Maven
jars, its REST API on loopback. Connectors are registered through lakehouse.cdc.connector."""

from __future__ import annotations

import os

from infra.bootstrap import java_home
from infra.services.base import Service
from lakehouse.core import secrets
from lakehouse.core.paths import REPO_ROOT, connect_jars_dir
from lakehouse.core.processes import Proc, ServiceError, http_ok, require_free_port, wait_until

TEMPLATE = REPO_ROOT / "infra" / "connect" / "worker.properties"
LOG4J = REPO_ROOT / "infra" / "connect" / "log4j2.properties"
# The worker reads the database password from its environment (worker.properties,
# config.providers): connector configs only name it.
PASSWORD_ENV = "TRIBUTARY_POSTGRES_PASSWORD"


class Connect(Service):
    name = "connect"

    def procs(self) -> list[Proc]:
        return [self.proc("connect")]

    def address(self) -> str:
        svc = self.ctx.settings.services
        return f"http://{svc.bind_host}:{svc.connect_port}"

    def healthy(self) -> bool:
        return http_ok(f"{self.address()}/")

    def start(self) -> None:
        svc = self.ctx.settings.services
        jars = connect_jars_dir()
        if not (jars / ".complete").exists():
            raise ServiceError(f"connect: jars missing from {jars}; run `make setup`")
        password = secrets.read_secrets().get("POSTGRES_PASSWORD")
        if not password:
            raise ServiceError("connect: no POSTGRES_PASSWORD secret; run `make setup`")
        require_free_port(
            "connect", svc.bind_host, svc.connect_port, "TRIBUTARY__SERVICES__CONNECT_PORT"
        )
        logs = self.ctx.run_dir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        proc = self.proc("connect")
        proc.start(
            [
                str(java_home() / "bin" / "java"),
                "-Xms128m",
                f"-Xmx{svc.connect_heap}",
                "-XX:+UseG1GC",
                "-Djava.awt.headless=true",
                f"-Dlog4j2.configurationFile={LOG4J}",
                f"-Dconnect.logs.dir={logs}",
                "-cp",
                f"{jars}/*",
                "org.apache.kafka.connect.cli.ConnectDistributed",
                str(self._write_properties()),
            ],
            env={**os.environ, PASSWORD_ENV: password},
        )
        # The first start creates the internal topics and joins the group: about half a minute.
        wait_until(self.healthy, timeout=180, what="waiting for Kafka Connect", proc=proc, every=2)

    def _write_properties(self) -> str:
        svc = self.ctx.settings.services
        self.data.mkdir(parents=True, exist_ok=True)
        text = TEMPLATE.read_text().format(
            bootstrap_servers=self.ctx.settings.kafka.bootstrap_servers,
            host=svc.bind_host,
            port=svc.connect_port,
            group_id=svc.connect_group_id,
            storage_prefix=svc.connect_storage_topic_prefix,
        )
        path = self.data / "worker.properties"
        path.write_text(text)
        return str(path)
