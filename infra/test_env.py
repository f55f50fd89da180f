"""The services the tests run on: their own, beside any that `make up` started.

A test run gets its own state folder ($TRIBUTARY_CACHE/test-state: the lakehouse, Kafka's log,
MinIO's data, Airflow's database, secrets, logs) and its own ports. So `make test` never writes
into the lakehouse a demo built (the DAG tests run replays and promote versions there), and
never runs its DAG tests in an Airflow that another clone started with that clone's DAGs.

    python -m infra.test_env COMMAND [ARG ...]   # COMMAND in the test services' environment
    python -m infra.test_env --fresh             # a new lakehouse and Kafka log (stopped only)

`make test`, `make test-up` and `make test-down` start and stop the services through it, and
tests/conftest.py applies the same environment, so a `pytest` run by hand uses them too.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

from lakehouse.core.paths import STATE_ENV, cache_dir
from lakehouse.core.secrets import ensure_secrets

# Each the default (config/base.yaml, services) plus 10000.
TEST_PORTS = {
    "kafka_port": 19092,
    "kafka_controller_port": 19093,
    "minio_port": 19000,
    "minio_console_port": 19001,
    "airflow_port": 18080,
}
HOST = "127.0.0.1"
# How every test process and job runs Spark. Test data is tiny: compiling code for each query
# and adaptive planning cost more than they save, and nobody looks at a test's web UI. None of
# these changes a result.
TEST_SPARK_CONF = {
    "spark.ui.enabled": "false",
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.shuffle.partitions": "1",
}
TEST_DRIVER_MEMORY = "2g"
# The jobs and DAG tasks the tests start live for seconds to minutes, running each query a
# few times: the optimizing compiler (C2) would spend more CPU compiling than its code saves
# (docs/testing.md). A run's own driver may keep it: tests/conftest.py `driver_settings`.
# C1 alone gets a client VM's 48 MB code cache, which Spark and Delta fill within minutes; a
# full cache makes the JVM throw compiled code away and compile it again, or stop compiling.
# The size the JVM gives both compilers keeps it from filling.
TEST_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m"


def state_folder(env: Mapping[str, str] | None = None) -> Path:
    return cache_dir(os.environ if env is None else env) / "test-state"


def environ(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """`env` (default: this process's) with Tributary pointed at the test services."""
    base = dict(os.environ if env is None else env)
    ports = {f"TRIBUTARY__SERVICES__{k.upper()}": str(v) for k, v in TEST_PORTS.items()}
    return {
        **base,
        STATE_ENV: str(state_folder(base)),
        # The tests choose their profile per test; services and DAG tasks run the local one.
        "TRIBUTARY_PROFILE": "local",
        "TRIBUTARY__SERVICES__BIND_HOST": HOST,
        **ports,
        "TRIBUTARY__KAFKA__BOOTSTRAP_SERVERS": f"{HOST}:{TEST_PORTS['kafka_port']}",
        "TRIBUTARY__S3__ENDPOINT": f"http://{HOST}:{TEST_PORTS['minio_port']}",
        "TRIBUTARY__AIRFLOW__URL": f"http://{HOST}:{TEST_PORTS['airflow_port']}",
        # The DAG files do not change while the tests run: parsing them every 15 s would
        # only take CPU from the tests.
        "TRIBUTARY__SERVICES__AIRFLOW_REPARSE_SECONDS": "240",
        "TRIBUTARY__SPARK__DRIVER_MEMORY": TEST_DRIVER_MEMORY,
        "TRIBUTARY__SPARK__JAVA_OPTIONS": TEST_JAVA_OPTIONS,
        **{f"TRIBUTARY__SPARK__CONF__{key}": value for key, value in TEST_SPARK_CONF.items()},
    }


# The data a test run writes and reads: each run that starts the services starts without it,
# so no test depends on what another run, another clone or an older release left (a bronze
# table of another schema, a live topic's history). Airflow's database, MinIO's data (each
# run writes under a prefix of its own, deleted at its end) and the secrets stay.
FRESH_EACH_RUN = ("lakehouse", "checkpoints", "dq", "ledgers", "spark-warehouse", "kafka")


def fresh_state() -> str:
    """Delete FRESH_EACH_RUN from the test state folder, unless Kafka is running there (a
    `make test-up` left for pytest by hand). Says what it did."""
    import shutil

    from infra.services.base import Context
    from infra.services.kafka import Kafka
    from lakehouse.core.config import get_settings

    folder = state_folder()
    if Kafka(Context(settings=get_settings(), state=folder)).running():
        return "==> test services already running: keeping their lakehouse and Kafka log"
    gone = [name for name in FRESH_EACH_RUN if (folder / name).exists()]
    for name in gone:
        shutil.rmtree(folder / name)
    return f"==> test state: a new {', '.join(FRESH_EACH_RUN)} ({folder})"


def apply() -> None:
    """Point this process (and what it starts) at the test services, their secrets made."""
    os.environ.update(environ())
    ensure_secrets()


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if argv else 2
    apply()
    if argv == ["--fresh"]:
        print(fresh_state())
        return 0
    try:
        os.execvp(argv[0], argv)
    except OSError as err:
        print(f"error: cannot run {argv[0]!r}: {err.strerror}", file=sys.stderr)
        return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
