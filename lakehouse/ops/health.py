"""Health checks of the platform's services, small enough for one Airflow task each.

Each check returns one line that describes what it found, or raises HealthCheckError with a
message that says what is wrong and what to do. Clients are imported inside the functions so
that importing this module (e.g. while Airflow parses a DAG) costs nothing.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from urllib.parse import urlparse

from lakehouse.core.config import Settings

# Short: a health check that hangs is worse than one that fails.
_KAFKA_TIMEOUT_MS = 10_000


class HealthCheckError(Exception):
    """A service is unreachable or unusable; the message says which and why."""


def check_kafka(settings: Settings) -> str:
    """Connect to the brokers and describe the cluster: 'Kafka at host:port: 1 broker, 3 topics'."""
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaError

    servers = settings.kafka.bootstrap_servers
    try:
        admin = KafkaAdminClient(
            bootstrap_servers=servers,
            request_timeout_ms=_KAFKA_TIMEOUT_MS,
            bootstrap_timeout_ms=_KAFKA_TIMEOUT_MS,
            client_id="tributary-health",
        )
    except KafkaError as err:
        raise HealthCheckError(
            f"Kafka at {servers} is unreachable ({err}); "
            "start it with `make up` or fix kafka.bootstrap_servers"
        ) from err
    try:
        brokers = len(admin.describe_cluster()["brokers"])
        topics = len(admin.list_topics())
    except KafkaError as err:
        raise HealthCheckError(
            f"Kafka at {servers} did not answer metadata requests: {err}"
        ) from err
    finally:
        admin.close()
    if brokers == 0:
        raise HealthCheckError(f"Kafka at {servers} reports no live brokers")
    return f"Kafka at {servers}: {brokers} broker{'s' * (brokers != 1)}, {topics} topics"


def check_storage(settings: Settings) -> str:
    """Prove the lakehouse root is usable: writable on local disk, or its bucket exists on S3."""
    root = settings.storage.root
    if root.startswith("s3a://"):
        return _check_bucket(settings, root)
    return _check_folder(Path(root.removeprefix("file://")))


def _check_folder(folder: Path) -> str:
    # A unique name, so concurrent checks never delete each other's marker.
    marker = folder / f".tributary-health-{uuid.uuid4().hex}"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        marker.write_text("ok\n")
        marker.unlink()
    except OSError as err:
        raise HealthCheckError(f"local storage root {folder} is not writable: {err}") from err
    return f"local storage at {folder}: writable"


def _check_bucket(settings: Settings, root: str) -> str:
    from lakehouse.core.storage import StorageError, s3_client

    bucket = urlparse(root).netloc
    endpoint = settings.s3.endpoint
    try:
        exists = s3_client(settings).bucket_exists(bucket)
    except StorageError as err:
        raise HealthCheckError(str(err)) from err
    except Exception as err:  # minio and urllib3 raise many types; all mean "cannot use it"
        raise HealthCheckError(f"S3 endpoint {endpoint} cannot be used: {err}") from err
    if not exists:
        raise HealthCheckError(
            f"bucket {bucket!r} does not exist at {endpoint}: create it "
            "(`make up` creates the bucket named by s3.bucket)"
        )
    return f"S3 storage at {endpoint}: bucket {bucket!r} exists ({root})"
