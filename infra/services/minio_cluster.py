"""The loopback cluster's MinIO: one server over several drive folders, erasure coded (with
4 drives, 2 data and 2 parity blocks per object: any 2 drives can be lost for reads, 1 for
writes). Same binary, same generated root credentials as the embedded MinIO."""

from __future__ import annotations

import os

from infra.bootstrap import minio_binary
from infra.services.base import Service
from lakehouse.core import secrets
from lakehouse.core.config import Settings
from lakehouse.core.processes import Proc, ServiceError, http_ok, require_free_port, wait_until
from lakehouse.core.storage import ensure_bucket


class MinioCluster(Service):
    name = "minio-cluster"

    def procs(self) -> list[Proc]:
        return [self.proc("minio-cluster")]

    def address(self) -> str:
        host = self.ctx.settings.services.bind_host
        return f"http://{host}:{self.ctx.settings.cluster.minio_port}"

    def drives(self) -> list[str]:
        return [
            str(self.data / f"drive{i}")
            for i in range(1, self.ctx.settings.cluster.minio_drives + 1)
        ]

    def healthy(self) -> bool:
        # /minio/health/cluster answers 200 only while enough drives for writes are online.
        return http_ok(f"{self.address()}/minio/health/cluster")

    def start(self) -> None:
        settings = self.ctx.settings
        host = settings.services.bind_host
        binary = minio_binary()
        if not binary.exists():
            raise ServiceError(f"minio-cluster: server binary missing ({binary}); run `make setup`")
        found = secrets.read_secrets()
        if "S3_ACCESS_KEY" not in found or "S3_SECRET_KEY" not in found:
            raise ServiceError(
                "minio-cluster: no root credentials; run `make setup` to generate them"
            )
        for port, setting in (
            (settings.cluster.minio_port, "TRIBUTARY__CLUSTER__MINIO_PORT"),
            (settings.cluster.minio_console_port, "TRIBUTARY__CLUSTER__MINIO_CONSOLE_PORT"),
        ):
            require_free_port("minio-cluster", host, port, setting)
        for drive in self.drives():
            os.makedirs(drive, exist_ok=True)
        env = {
            **os.environ,
            "MINIO_ROOT_USER": found["S3_ACCESS_KEY"],
            "MINIO_ROOT_PASSWORD": found["S3_SECRET_KEY"],
            "MINIO_BROWSER_REDIRECT": "off",
            "MINIO_UPDATE": "off",
            # The drive folders share one disk here, which MinIO refuses outside CI/CD mode.
            "MINIO_CI_CD": "1",
        }
        proc = self.proc("minio-cluster")
        proc.start(
            [
                str(binary),
                "server",
                *self.drives(),
                "--quiet",
                "--address",
                f"{host}:{settings.cluster.minio_port}",
                "--console-address",
                f"{host}:{settings.cluster.minio_console_port}",
            ],
            env=env,
        )
        wait_until(self.healthy, timeout=60, what="waiting for MinIO's drives", proc=proc)
        ensure_bucket(self.client_settings())

    def client_settings(self) -> Settings:
        """The settings with S3 pointed at this server, whatever the profile points it at."""
        s3 = self.ctx.settings.s3.model_copy(update={"endpoint": self.address()})
        return self.ctx.settings.model_copy(update={"s3": s3})
