"""docker-compose.yml is valid, keeps every port on 127.0.0.1 and has no default credential.

Only `docker compose config` runs: it needs the docker CLI and its compose plugin, not an engine.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
from pathlib import Path

import pytest

from infra.bootstrap import compose_plugin_dir

REPO_ROOT = Path(__file__).parents[2]
COMPOSE_FILE = REPO_ROOT / "docker-compose.yml"
SECRET_VARS = (
    "TRIBUTARY_S3_ACCESS_KEY",
    "TRIBUTARY_S3_SECRET_KEY",
    "TRIBUTARY_POSTGRES_PASSWORD",
    "TRIBUTARY_AIRFLOW_JWT_SECRET",
    "TRIBUTARY_AIRFLOW_FERNET_KEY",
    "TRIBUTARY_AIRFLOW_ADMIN_PASSWORD",
)
# The loopback cluster's topology (docs/cluster.md): three brokers, a master and two workers.
REQUIRED_SERVICES = {
    "kafka-1",
    "kafka-2",
    "kafka-3",
    "minio",
    "spark-master",
    "spark-worker-1",
    "spark-worker-2",
    "postgres",
    "shop-db",
    "connect",
    "airflow-apiserver",
    "airflow-scheduler",
}


def with_plugin(env: dict[str, str]) -> dict[str, str]:
    # `make setup` builds the compose plugin into the cache; DOCKER_CONFIG points the CLI at it.
    return env | {"DOCKER_CONFIG": str(compose_plugin_dir())}


def require_compose() -> None:
    if shutil.which("docker") is None:
        pytest.fail("the docker CLI is not installed: this test needs `docker compose config`")
    probe = subprocess.run(
        ["docker", "compose", "version"],
        capture_output=True,
        text=True,
        env=with_plugin(dict(os.environ)),
    )
    if probe.returncode != 0:
        pytest.fail(
            f"the docker compose plugin is missing ({probe.stderr.strip()}): run `make setup`"
        )


def compose_config(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    require_compose()
    env = with_plugin(env)
    # --env-file: a developer's untracked .env must not supply the secrets this test removes.
    cmd = ["docker", "compose", "--env-file", os.devnull, "-f", str(COMPOSE_FILE)]
    cmd += ["config", "--format", "json"]
    return subprocess.run(cmd, env=env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)


def env_without_secrets() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in SECRET_VARS}


def env_with_secrets() -> dict[str, str]:
    # Fresh values each run: nothing may depend on a known credential.
    return env_without_secrets() | {name: secrets.token_hex(16) for name in SECRET_VARS}


def image_tag(image: str) -> str | None:
    name = image.split("@", 1)[0].rsplit("/", 1)[-1]
    return name.split(":", 1)[1] if ":" in name else None


def test_compose_config_is_valid_local_only_and_pinned() -> None:
    env = env_with_secrets()
    result = compose_config(env)
    assert result.returncode == 0, result.stderr
    services = json.loads(result.stdout)["services"]

    missing = REQUIRED_SERVICES - services.keys()
    assert not missing, f"services missing from docker-compose.yml: {sorted(missing)}"
    assert services["minio"]["environment"]["MINIO_ROOT_USER"] == env["TRIBUTARY_S3_ACCESS_KEY"]
    assert "/data{1...4}" in services["minio"]["command"], "MinIO on four drives"
    brokers = [services[f"kafka-{n}"]["environment"] for n in (1, 2, 3)]
    assert {b["KAFKA_DEFAULT_REPLICATION_FACTOR"] for b in brokers} == {"3"}
    assert {b["KAFKA_MIN_INSYNC_REPLICAS"] for b in brokers} == {"2"}
    for name, service in services.items():
        for port in service.get("ports", []):
            assert port.get("host_ip") == "127.0.0.1", f"{name} publishes {port} beyond localhost"
        environment = service.get("environment") or {}
        for key, value in environment.items():
            assert "SIMPLE_AUTH_MANAGER_ALL_ADMINS" not in key, f"{name} makes everyone admin"
            assert "minioadmin" not in str(value).lower(), f"{name}: default MinIO credential"
        tag = image_tag(service["image"])
        assert tag not in (None, "", "latest"), f"{name}: image {service['image']} is not pinned"


def test_compose_refuses_to_start_without_each_secret() -> None:
    assert compose_config(env_without_secrets()).returncode != 0
    # One at a time, so that no single secret can have a silent default.
    for missing in SECRET_VARS:
        env = env_with_secrets()
        del env[missing]
        result = compose_config(env)
        assert result.returncode != 0, f"compose accepted a missing {missing}"
        assert missing in result.stdout + result.stderr
