"""A MinIO server (S3 API) built from source by `make setup`, bound to loopback."""

from __future__ import annotations

import os

from infra.bootstrap import minio_binary
from infra.services.base import Service
from lakehouse.core import secrets
from lakehouse.core.processes import Proc, ServiceError, http_ok, require_free_port, wait_until
from lakehouse.core.storage import ensure_bucket


class Minio(Service):
    name = "minio"

    def procs(self) -> list[Proc]:
        return [self.proc("minio")]

    def address(self) -> str:
        svc = self.ctx.settings.services
        return f"http://{svc.bind_host}:{svc.minio_port}"

    def healthy(self) -> bool:
        return http_ok(f"{self.address()}/minio/health/live")

    def start(self) -> None:
        svc = self.ctx.settings.services
        binary = minio_binary()
        if not binary.exists():
            raise ServiceError(f"minio: server binary missing ({binary}); run `make setup`")
        found = secrets.read_secrets()
        if "S3_ACCESS_KEY" not in found or "S3_SECRET_KEY" not in found:
            raise ServiceError("minio: no root credentials; run `make setup` to generate them")
        require_free_port("minio", svc.bind_host, svc.minio_port, "TRIBUTARY__SERVICES__MINIO_PORT")
        require_free_port(
            "minio",
            svc.bind_host,
            svc.minio_console_port,
            "TRIBUTARY__SERVICES__MINIO_CONSOLE_PORT",
        )
        (self.data / "data").mkdir(parents=True, exist_ok=True)
        env = {
            **os.environ,
            "MINIO_ROOT_USER": found["S3_ACCESS_KEY"],
            "MINIO_ROOT_PASSWORD": found["S3_SECRET_KEY"],
            "MINIO_BROWSER_REDIRECT": "off",
            "MINIO_UPDATE": "off",
            "MINIO_CI_CD": "1",
        }
        proc = self.proc("minio")
        proc.start(
            [
                str(binary),
                "server",
                str(self.data / "data"),
                "--quiet",
                "--address",
                f"{svc.bind_host}:{svc.minio_port}",
                "--console-address",
                f"{svc.bind_host}:{svc.minio_console_port}",
            ],
            env=env,
        )
        wait_until(self.healthy, timeout=60, what="waiting for MinIO", proc=proc)
        ensure_bucket(self.ctx.settings)
