"""Is the platform usable? Checks Kafka and the lakehouse storage, on demand."""

from __future__ import annotations

import logging
from datetime import timedelta

from airflow.sdk import dag, task

# Airflow imports DAG files under mangled module names; give the log a readable one.
log = logging.getLogger("tributary.dags.platform_health")

# A check that cannot connect should fail within minutes, not hold a worker slot.
CHECK_TIMEOUT = timedelta(minutes=2)

DOC = """
### Platform health

Run this DAG by hand when something looks wrong, or before starting the pipelines, to see
whether the services Tributary depends on can be used from Airflow's workers:

- **check_kafka** connects to the brokers in `kafka.bootstrap_servers` and reports how many
  brokers and topics it sees.
- **check_storage** proves the lakehouse root (`storage.root`) is usable: on local disk it
  writes and deletes a marker file; on S3/MinIO it checks that the bucket exists.

Each task logs one line (also its XCom return value) describing what it found, and fails with
a message saying what to fix. The checks live in `lakehouse.ops.health`; this file only schedules
them. Configuration comes from the worker's environment (`TRIBUTARY_PROFILE`, `config/`).
"""


@dag(
    dag_id="platform_health",
    schedule=None,
    catchup=False,
    tags=["tributary", "ops"],
    description="Checks that Kafka and the lakehouse storage can be used",
    doc_md=DOC,
)
def platform_health() -> None:
    @task(execution_timeout=CHECK_TIMEOUT)
    def check_kafka() -> str:
        from lakehouse.core.config import get_settings
        from lakehouse.ops import health

        line = health.check_kafka(get_settings())
        log.info("%s", line)
        return line

    @task(execution_timeout=CHECK_TIMEOUT)
    def check_storage() -> str:
        from lakehouse.core.config import get_settings
        from lakehouse.ops import health

        line = health.check_storage(get_settings())
        log.info("%s", line)
        return line

    check_kafka()
    check_storage()


platform_health()
