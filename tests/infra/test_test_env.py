"""The tests run on services of their own: other ports and another state folder than the ones
`make up` and `make demo` use, so a test run never writes into a demo's lakehouse."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from infra import test_env
from lakehouse.core.config import get_settings, load_settings
from lakehouse.core.paths import state_dir
from lakehouse.core.secrets import read_secrets

REPO = Path(__file__).parents[2]


def clean_env(tmp_path: Path) -> dict[str, str]:
    return {"TRIBUTARY_CACHE": str(tmp_path / "cache")}


def test_every_test_service_listens_elsewhere_than_the_default_and_clients_follow(
    tmp_path: Path,
) -> None:
    default = load_settings(environ=clean_env(tmp_path))
    tests = load_settings(environ=test_env.environ(clean_env(tmp_path)))
    default_ports = set(default.services.model_dump().values())
    for name in test_env.TEST_PORTS:
        assert getattr(tests.services, name) not in default_ports, name
    assert tests.services.bind_host == "127.0.0.1"
    assert tests.kafka.bootstrap_servers == f"127.0.0.1:{tests.services.kafka_port}"
    assert tests.s3.endpoint == f"http://127.0.0.1:{tests.services.minio_port}"
    assert tests.airflow.url == f"http://127.0.0.1:{tests.services.airflow_port}"
    assert tests.cdc.connect_url == f"http://127.0.0.1:{tests.services.connect_port}"
    assert (tests.cdc.database_host, tests.cdc.database_port) == (
        "127.0.0.1",
        tests.services.postgres_port,
    )
    assert {
        name: getattr(default.services, name) for name in test_env.DEFAULT_PORTS
    } == test_env.DEFAULT_PORTS, "the tests' ports are the defaults moved by the offset"
    assert tests.profile == "local"
    assert tests.spark.conf == test_env.TEST_SPARK_CONF, "every test job runs Spark the same way"
    assert tests.spark.java_options == test_env.TEST_JAVA_OPTIONS


def test_the_tests_keep_their_state_apart_from_the_demo(tmp_path: Path) -> None:
    env = clean_env(tmp_path)
    tests_state = state_dir(test_env.environ(env))
    assert tests_state == tmp_path / "cache" / "test-state"
    assert tests_state != state_dir(env)
    tests = load_settings(environ=test_env.environ(env))
    assert tests.storage.root == str(tests_state / "lakehouse")


def test_another_port_offset_is_another_test_environment(tmp_path: Path) -> None:
    env = clean_env(tmp_path) | {test_env.PORT_OFFSET_ENV: "20000"}
    tests = load_settings(environ=test_env.environ(env))
    assert tests.services.kafka_port == 29092
    assert tests.cdc.connect_url == "http://127.0.0.1:28083"
    assert state_dir(test_env.environ(env)) == tmp_path / "cache" / "test-state-20000"


def test_this_test_run_itself_uses_the_test_services() -> None:
    assert state_dir() == test_env.state_folder()
    settings = get_settings()
    assert settings.services.airflow_port == test_env.TEST_PORTS["airflow_port"]
    assert settings.kafka.bootstrap_servers.endswith(f":{test_env.TEST_PORTS['kafka_port']}")
    assert "AIRFLOW_ADMIN_PASSWORD" in read_secrets()  # generated in the test state folder


def run(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "infra.test_env", *args],
        cwd=REPO,
        env={**env, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_wrapper_runs_a_command_in_the_test_environment_with_its_secrets(
    tmp_path: Path,
) -> None:
    env = clean_env(tmp_path)
    show = "import os; print(os.environ['TRIBUTARY_STATE'], os.environ['TRIBUTARY__AIRFLOW__URL'])"
    result = run(sys.executable, "-c", show, env=env)
    assert result.returncode == 0, result.stderr
    state = tmp_path / "cache" / "test-state"
    assert result.stdout.split() == [str(state), "http://127.0.0.1:18080"]
    assert (state / "secrets.env").stat().st_mode & 0o077 == 0


def test_the_wrapper_says_so_when_the_command_does_not_exist(tmp_path: Path) -> None:
    result = run("no-such-command-here", env=clean_env(tmp_path))
    assert result.returncode == 127
    assert result.stderr.startswith("error: cannot run 'no-such-command-here'")
    assert "Traceback" not in result.stderr
