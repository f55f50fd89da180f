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

# The services' default ports (config/base.yaml, services).
DEFAULT_PORTS = {
    "kafka_port": 9092,
    "kafka_controller_port": 9093,
    "minio_port": 9000,
    "minio_console_port": 9001,
    "airflow_port": 8080,
    "airflow_execution_port": 8081,
    "postgres_port": 5433,
    "connect_port": 8083,
}
# The tests' ports are the defaults plus this. Another offset is another test environment,
# with its state folder of its own (state_folder), so a second one can run beside the first
# (another clone's `make test`, or one part of the services while a full run goes on).
PORT_OFFSET_ENV = "TRIBUTARY_TEST_PORT_OFFSET"
DEFAULT_PORT_OFFSET = 10000


def test_ports(offset: int = DEFAULT_PORT_OFFSET) -> dict[str, int]:
    return {name: port + offset for name, port in DEFAULT_PORTS.items()}


TEST_PORTS = test_ports()
HOST = "127.0.0.1"
# How every test process and job runs Spark. Test data is tiny: compiling code for each query
# and adaptive planning cost more than they save, and nobody looks at a test's web UI. Nor do
# the filters the optimizer infers from a plan's constraints pay for inferring them, a cost that
# grows fast with a plan's filters and aliases. None of these changes a result.
TEST_SPARK_CONF = {
    "spark.ui.enabled": "false",
    "spark.sql.constraintPropagation.enabled": "false",
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


def port_offset(env: Mapping[str, str] | None = None) -> int:
    raw = (os.environ if env is None else env).get(PORT_OFFSET_ENV) or str(DEFAULT_PORT_OFFSET)
    if not raw.isdigit() or not 1000 <= int(raw) <= 50000:
        raise SystemExit(f"{PORT_OFFSET_ENV}={raw!r}: give a whole number from 1000 to 50000")
    return int(raw)


def state_folder(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    offset = port_offset(env)
    name = "test-state" if offset == DEFAULT_PORT_OFFSET else f"test-state-{offset}"
    return cache_dir(env) / name


def environ(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """`env` (default: this process's) with Tributary pointed at the test services."""
    base = dict(os.environ if env is None else env)
    ports_now = test_ports(port_offset(base))
    ports = {f"TRIBUTARY__SERVICES__{k.upper()}": str(v) for k, v in ports_now.items()}
    return {
        **base,
        STATE_ENV: str(state_folder(base)),
        # The tests choose their profile per test; services and DAG tasks run the local one.
        "TRIBUTARY_PROFILE": "local",
        "TRIBUTARY__SERVICES__BIND_HOST": HOST,
        **ports,
        "TRIBUTARY__KAFKA__BOOTSTRAP_SERVERS": f"{HOST}:{ports_now['kafka_port']}",
        "TRIBUTARY__S3__ENDPOINT": f"http://{HOST}:{ports_now['minio_port']}",
        "TRIBUTARY__AIRFLOW__URL": f"http://{HOST}:{ports_now['airflow_port']}",
        "TRIBUTARY__CDC__CONNECT_URL": f"http://{HOST}:{ports_now['connect_port']}",
        "TRIBUTARY__CDC__DATABASE_HOST": HOST,
        "TRIBUTARY__CDC__DATABASE_PORT": str(ports_now["postgres_port"]),
        # The DAG files do not change while the tests run: parsing them every 15 s would
        # only take CPU from the tests.
        "TRIBUTARY__SERVICES__AIRFLOW_REPARSE_SECONDS": "240",
        "TRIBUTARY__SPARK__DRIVER_MEMORY": TEST_DRIVER_MEMORY,
        "TRIBUTARY__SPARK__JAVA_OPTIONS": TEST_JAVA_OPTIONS,
        **{f"TRIBUTARY__SPARK__CONF__{key}": value for key, value in TEST_SPARK_CONF.items()},
    }


# The data a test run writes and reads: each run that starts the services starts without it,
# so no test depends on what another run, another clone or an older release left (a bronze
# table of another schema, a live topic's history). The shop database's cluster goes with
# the Kafka log: Connect keeps its connectors' offsets in Kafka, and a replication slot
# older than them would hold WAL for changes no topic will ever get. Airflow's database
# stays but for its asset events, which name batch runs of the lakehouse deleted here; MinIO's
# data (each run writes under a prefix of its own, deleted at its end) and the secrets stay.
FRESH_EACH_RUN = ("lakehouse", "checkpoints", "dq", "ledgers", "spark-warehouse", "kafka")


def fresh_state() -> str:
    """Delete FRESH_EACH_RUN from the test state folder, unless Kafka is running there (a
    `make test-up` left for pytest by hand). Says what it did."""
    import shutil

    from infra.services.airflow import (
        Airflow,
        forget_asset_events,
        pause_dags_and_end_unfinished_runs,
    )
    from infra.services.base import Context
    from infra.services.kafka import Kafka
    from infra.services.postgres import Postgres
    from lakehouse.core.config import get_settings

    folder = state_folder()
    ctx = Context(settings=get_settings(), state=folder)
    postgres, airflow = Postgres(ctx), Airflow(ctx)
    if Kafka(ctx).running() or postgres.running() or airflow.running():
        return "==> test services already running: keeping their lakehouse, Kafka log and database"
    gone = [name for name in FRESH_EACH_RUN if (folder / name).exists()]
    for name in gone:
        shutil.rmtree(folder / name)
    postgres.delete_cluster()
    if airflow.database().exists():
        forget_asset_events(airflow.database())
        pause_dags_and_end_unfinished_runs(airflow.database())
    return (
        f"==> test state: a new {', '.join(FRESH_EACH_RUN)} and shop database, no asset event, "
        f"no unfinished run and every DAG paused in Airflow's ({folder})"
    )


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
