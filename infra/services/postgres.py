"""PostgreSQL 15 (Debian's server binaries) as a private cluster: the shop database that
change data capture reads, with logical decoding on, bound to loopback, passwords only."""

from __future__ import annotations

import hashlib
import os
import pwd
import shutil
import signal
import subprocess
from pathlib import Path

from infra.bootstrap import POSTGRES_BIN
from infra.services.base import Service
from lakehouse.core import secrets
from lakehouse.core.paths import REPO_ROOT
from lakehouse.core.processes import Proc, ServiceError, require_free_port, wait_until

TEMPLATES = REPO_ROOT / "infra" / "postgres"
# initdb and postgres refuse to run as root; run as root, we run them as this OS user.
OS_USER = "postgres"


class Postgres(Service):
    name = "postgres"

    def procs(self) -> list[Proc]:
        return [self.proc("postgres")]

    def stop(self) -> bool:
        # SIGINT is PostgreSQL's fast shutdown (pg_ctl's default): clients are disconnected.
        # SIGTERM waits for every client to leave, and a connector's replication never does,
        # so the stop would end in SIGKILL and leave a lock file the next start refuses.
        return self.proc("postgres").stop(sig=signal.SIGINT)

    def address(self) -> str:
        return f"{self.ctx.settings.services.bind_host}:{self.ctx.settings.services.postgres_port}"

    @property
    def cluster(self) -> Path:
        """The cluster's folder. Run as root, the server runs as the postgres user, which cannot
        enter the state folder (it is under /root, mode 700): the cluster lives in that user's
        home instead, in a folder named by a hash of the state folder, so that two state
        folders (the demo's, the tests') never share one. Otherwise it is in the state folder."""
        if os.geteuid() != 0:
            return self.data / "cluster"
        key = hashlib.sha256(str(self.ctx.state.resolve()).encode()).hexdigest()[:12]
        return Path(pwd.getpwnam(OS_USER).pw_dir) / "tributary" / key

    def healthy(self) -> bool:
        svc = self.ctx.settings.services
        ready = subprocess.run(
            [
                str(POSTGRES_BIN / "pg_isready"),
                "-q",
                "-h",
                svc.bind_host,
                "-p",
                str(svc.postgres_port),
            ],
            capture_output=True,
        )
        return ready.returncode == 0

    def start(self) -> None:
        svc = self.ctx.settings.services
        if not (POSTGRES_BIN / "postgres").exists():
            raise ServiceError(f"postgres: no server in {POSTGRES_BIN}; run `make setup`")
        password = secrets.read_secrets().get("POSTGRES_PASSWORD")
        if not password:
            raise ServiceError("postgres: no POSTGRES_PASSWORD secret; run `make setup`")
        require_free_port(
            "postgres", svc.bind_host, svc.postgres_port, "TRIBUTARY__SERVICES__POSTGRES_PORT"
        )
        if not (self.cluster / "data" / "PG_VERSION").exists():
            self._initdb()
        conf = self._write_config()
        proc = self.proc("postgres")
        proc.start(
            self._as_server_user(
                [
                    str(POSTGRES_BIN / "postgres"),
                    "-D",
                    str(self.cluster / "data"),
                    "-c",
                    f"config_file={conf}",
                ]
            ),
            env=self._server_env(),
            cwd=self.cluster,
        )
        wait_until(self.healthy, timeout=60, what="waiting for PostgreSQL", proc=proc)
        self._create_role_and_database(password)
        self._apply_schema(password)

    def delete_cluster(self) -> bool:
        """Remove the cluster's data (stopped only): the next start makes a new one."""
        if self.running():
            raise ServiceError("postgres: stop it before deleting its cluster")
        existed = self.cluster.exists()
        shutil.rmtree(self.cluster, ignore_errors=True)
        return existed

    def _as_server_user(self, cmd: list[str]) -> list[str]:
        if os.geteuid() != 0:
            return cmd
        # setpriv execs the command itself (no process in between), so the pid file names the
        # postmaster and a stop signals it directly.
        return ["setpriv", f"--reuid={OS_USER}", f"--regid={OS_USER}", "--init-groups", *cmd]

    def _server_env(self) -> dict[str, str]:
        # Only what the server needs: it must not inherit the secrets in this environment.
        return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C.UTF-8", "TZ": "UTC"}

    def _prepare_cluster_folder(self) -> None:
        self.cluster.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            user = pwd.getpwnam(OS_USER)
            for folder in (self.cluster.parent, self.cluster):
                os.chown(folder, user.pw_uid, user.pw_gid)
        self.cluster.chmod(0o700)
        self.data.mkdir(parents=True, exist_ok=True)

    def _initdb(self) -> None:
        self._prepare_cluster_folder()
        print(f"    creating the cluster in {self.cluster / 'data'}", flush=True)
        result = subprocess.run(
            self._as_server_user(
                [
                    str(POSTGRES_BIN / "initdb"),
                    "-D",
                    str(self.cluster / "data"),
                    "--encoding=UTF8",
                    "--no-locale",
                    "--auth-local=peer",
                    "--auth-host=scram-sha-256",
                ]
            ),
            env=self._server_env(),
            cwd=self.cluster,
            capture_output=True,
            text=True,
        )
        if result.returncode != 0:
            raise ServiceError(
                "postgres: initdb failed: " + (result.stderr or result.stdout).strip()[-400:]
            )

    def _write_config(self) -> Path:
        svc = self.ctx.settings.services
        self._prepare_cluster_folder()
        hba = self.cluster / "pg_hba.conf"
        conf = self.cluster / "postgresql.conf"
        hba.write_text((TEMPLATES / "pg_hba.conf").read_text().format(superuser=self._superuser()))
        conf.write_text(
            (TEMPLATES / "postgresql.conf")
            .read_text()
            .format(
                host=svc.bind_host,
                port=svc.postgres_port,
                socket_dir=self.cluster,
                hba_file=hba,
            )
        )
        if os.geteuid() == 0:
            user = pwd.getpwnam(OS_USER)
            for path in (hba, conf):
                os.chown(path, user.pw_uid, user.pw_gid)
        # Where the cluster of this state folder is, for people looking.
        (self.data / "cluster-folder").write_text(f"{self.cluster}\n")
        return conf

    def _superuser(self) -> str:
        return OS_USER if os.geteuid() == 0 else pwd.getpwuid(os.geteuid()).pw_name

    def _create_role_and_database(self, password: str) -> None:
        cdc = self.ctx.settings.cdc
        svc = self.ctx.settings.services
        result = subprocess.run(
            self._as_server_user(
                [
                    str(POSTGRES_BIN / "psql"),
                    "-X",
                    "-q",
                    "-h",
                    str(self.cluster),
                    "-p",
                    str(svc.postgres_port),
                    "-U",
                    self._superuser(),
                    "-d",
                    "postgres",
                    "-v",
                    f"user={cdc.user}",
                    "-v",
                    f"database={cdc.database}",
                ]
            ),
            input=(TEMPLATES / "roles.sql").read_text(),
            env={**self._server_env(), "TRIBUTARY_POSTGRES_PASSWORD": password},
            cwd=self.cluster,
            capture_output=True,
            text=True,
        )
        if result.returncode != 0:
            raise ServiceError(
                "postgres: creating the shop role and database failed: "
                + (result.stderr or result.stdout).strip()[-400:]
            )

    def _apply_schema(self, password: str) -> None:
        import psycopg

        cdc = self.ctx.settings.cdc
        svc = self.ctx.settings.services
        # As the shop's own role, over TCP with its password: the tables are its own, and the
        # way every client logs in is checked at each start.
        with psycopg.connect(
            host=svc.bind_host,
            port=svc.postgres_port,
            dbname=cdc.database,
            user=cdc.user,
            password=password,
            connect_timeout=10,
            autocommit=True,
        ) as conn:
            conn.execute((TEMPLATES / "shop.sql").read_bytes())
            conn.execute((TEMPLATES / "signal.sql").read_bytes())
