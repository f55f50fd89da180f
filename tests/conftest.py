"""Shared fixtures. Integration tests use the real services `make test` starts, its own ones
(infra/test_env.py: own ports and state folder, never the ones `make up` started); when one is
not reachable the test fails (never skips) and says how to start it."""

from __future__ import annotations

import logging
import os
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from infra import test_env
from lakehouse.core.config import Settings, load_settings
from lakehouse.core.processes import http_ok, port_open
from tests.jobs_in_process import run_job_here, spark_refused  # noqa: F401  (fixtures for every test)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# Before any setting is read: this process and everything it starts use the test services.
test_env.apply()
# pyspark.testing.assertDataFrameEqual imports pandas-on-Spark, which needs this set before
# the session's JVM starts (it warns otherwise); our own code never uses pandas-on-Spark.
os.environ.setdefault("PYARROW_IGNORE_TIMEZONE", "1")

RUN_ID = uuid.uuid4().hex[:8]

# py4j logs from __del__ at interpreter exit, after pytest has closed its streams.
logging.getLogger("py4j").setLevel(logging.WARNING)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "/integration/" in str(item.path):
            item.add_marker(pytest.mark.integration)


def _settings(profile: str, **overrides: str) -> Settings:
    env = dict(os.environ)
    env.pop("TRIBUTARY_PROFILE", None)
    env.update({f"TRIBUTARY__{k.upper()}": v for k, v in overrides.items()})
    return load_settings(profile=profile, environ=env)


@pytest.fixture(scope="session")
def minio_settings() -> Settings:
    """The minio profile, with this run's own prefix in the bucket."""
    return _settings(
        "minio",
        storage__root=f"s3a://tributary/tests/{RUN_ID}/lakehouse",
        storage__checkpoints=f"s3a://tributary/tests/{RUN_ID}/checkpoints",
    )


@pytest.fixture
def local_settings(tmp_path: Path) -> Settings:
    """The local profile, with the lakehouse in this test's temporary folder."""
    return _settings(
        "local",
        storage__root=str(tmp_path / "lakehouse"),
        storage__checkpoints=str(tmp_path / "checkpoints"),
    )


# `make test` starts the services while the first tests run. It names two files: the record,
# which lists each service once it is up, and the start's exit status, written when it ends.
STARTING_RECORD = "TRIBUTARY_TEST_SERVICES_RECORD"
START_ENDED = "TRIBUTARY_TEST_SERVICES_ENDED"


# Longer than any start takes (Airflow's, the longest, about 3 minutes): a start that never
# reports its end must not hold the run until CI's limit.
START_WAIT_SECONDS = 900


def wait_for_start(name: str) -> None:
    """While `make test` is still starting the services, wait until this one is up or the start
    has ended (whatever its outcome: the caller then finds the service reachable or not), at
    most START_WAIT_SECONDS."""
    record, ended = os.environ.get(STARTING_RECORD), os.environ.get(START_ENDED)
    if not record or not ended:
        return
    deadline = time.monotonic() + START_WAIT_SECONDS
    while not Path(ended).exists() and time.monotonic() < deadline:
        if Path(record).exists() and name in Path(record).read_text().split():
            return
        time.sleep(0.5)


def require(name: str, reachable: Callable[[], bool], service: str, where: str) -> str:
    wait_for_start(name)
    if not reachable():
        pytest.fail(
            f"{service} is not reachable at {where}: `make test` starts the test services "
            "and stops them after; `make test-up` starts them and leaves them running"
        )
    return where


def kafka_reachable(settings: Settings) -> bool:
    host, _, port = settings.kafka.bootstrap_servers.split(",")[0].rpartition(":")
    return port_open(host, int(port))


@pytest.fixture(scope="session")
def kafka_up(minio_settings: Settings) -> str:
    servers = minio_settings.kafka.bootstrap_servers
    return require("kafka", lambda: kafka_reachable(minio_settings), "Kafka", servers)


@pytest.fixture(scope="session")
def minio_up(minio_settings: Settings) -> str:
    endpoint = minio_settings.s3.endpoint
    return require("minio", lambda: http_ok(f"{endpoint}/minio/health/live"), "MinIO", endpoint)


@pytest.fixture(scope="session")
def airflow_up(minio_settings: Settings) -> str:
    url = minio_settings.airflow.url
    return require("airflow", lambda: http_ok(f"{url}/api/v2/monitor/health"), "Airflow", url)


@pytest.fixture(scope="session")
def postgres_up(minio_settings: Settings) -> str:
    cdc = minio_settings.cdc
    where = f"{cdc.database_host}:{cdc.database_port}"
    reachable = lambda: port_open(cdc.database_host, cdc.database_port)  # noqa: E731
    return require("postgres", reachable, "PostgreSQL", where)


@pytest.fixture(scope="session")
def connect_up(minio_settings: Settings, kafka_up: str, postgres_up: str) -> str:
    url = minio_settings.cdc.connect_url
    return require("connect", lambda: http_ok(f"{url}/"), "Kafka Connect", url)


# The run's own driver runs a thousand tests' queries, and Spark keeps what they cached
# (Delta's table snapshots, local checkpoints) until its storage share of the heap is full:
# with the jobs' 2 GB, the rest of the heap ran short late in the run and the driver spent
# its time in full collections, one after another.
RUN_DRIVER_MEMORY = "4g"


@pytest.fixture(scope="session")
def driver_settings(minio_settings: Settings, request: pytest.FixtureRequest) -> Settings:
    """The settings of this run's own Spark driver, with RUN_DRIVER_MEMORY. The driver lives
    as long as the run: with integration tests in it (`make test`, about 30 minutes) the C2
    compiler's code pays back its compiling, so the driver keeps both compilers. The jobs the
    tests start, and the driver of a run without integration tests (`make test-fast`, a few
    minutes), run with the tests' JVM options (infra/test_env.py: C1 only)."""
    update = {"driver_memory": RUN_DRIVER_MEMORY}
    if any("/integration/" in str(item.path) for item in request.session.items):
        update["java_options"] = ""
    spark = minio_settings.spark.model_copy(update=update)
    return minio_settings.model_copy(update={"spark": spark})


@pytest.fixture(scope="session")
def spark(driver_settings: Settings) -> Iterator[SparkSession]:
    """One SparkSession for the whole run, from the one factory, with the tests' Spark settings
    (infra/test_env.py). It is configured for MinIO too (no connection is made until a test
    uses an s3a:// path, and those tests also ask for `minio_up`), so unit tests on tiny
    DataFrames need no service."""
    from lakehouse.core.spark import get_spark

    session = get_spark("tests", driver_settings)
    yield session
    session.stop()


TOPIC_PREFIX = f"test-{RUN_ID}-"


def new_topic(kind: str = "t") -> str:
    """A topic name of this run's own, deleted when the run ends."""
    return f"{TOPIC_PREFIX}{kind}-{uuid.uuid4().hex[:6]}"


@pytest.fixture
def topic_name() -> str:
    return new_topic()


@pytest.fixture(scope="session", autouse=True)
def run_leftovers_deleted_at_end(minio_settings: Settings) -> Iterator[None]:
    """Topics and the bucket keep what they hold forever; this run's own Kafka topics and
    its prefix in the bucket are deleted when it ends, so repeated runs do not fill the disk."""
    yield
    from lakehouse.core.kafka_io import delete_topics
    from lakehouse.core.storage import delete_prefix

    if kafka_reachable(minio_settings):
        delete_topics(minio_settings, TOPIC_PREFIX)
    if http_ok(f"{minio_settings.s3.endpoint}/minio/health/live"):
        delete_prefix(minio_settings, f"tests/{RUN_ID}/")
