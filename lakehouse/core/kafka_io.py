"""Kafka plumbing shared by jobs and tests: topics and producers (kafka-python)."""

from __future__ import annotations

import json
import re
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from lakehouse.core.config import Settings

if TYPE_CHECKING:
    from kafka import KafkaAdminClient
    from kafka.producer.future import FutureRecordMetadata, RecordMetadata


class KafkaUnavailableError(Exception):
    """Kafka cannot be used (no broker, or it refused the request); the message says why."""


Client = TypeVar("Client")


def connect(settings: Settings, client: Callable[..., Client], **options: Any) -> Client:
    """A kafka-python client (KafkaAdminClient, KafkaConsumer, ...) of the configured broker,
    with `options` for that client; KafkaUnavailableError, saying what to do, when no broker
    answers within `kafka.connect_timeout_seconds`."""
    from kafka.errors import KafkaConnectionError, KafkaTimeoutError

    try:
        return client(
            bootstrap_servers=settings.kafka.bootstrap_servers,
            request_timeout_ms=10_000,
            bootstrap_timeout_ms=int(settings.kafka.connect_timeout_seconds * 1000),
            **options,
        )
    except (KafkaConnectionError, KafkaTimeoutError):
        raise KafkaUnavailableError(
            f"no Kafka broker at {settings.kafka.bootstrap_servers}: start it with `make up`"
        ) from None


def check_broker(settings: Settings) -> None:
    """KafkaUnavailableError now, when no broker answers: for a job to call before it spends
    seconds starting Spark only to find that out."""
    _admin(settings).close()


def _admin(settings: Settings) -> KafkaAdminClient:
    from kafka import KafkaAdminClient

    return connect(settings, KafkaAdminClient)


def ensure_topic(
    settings: Settings, topic: str | None = None, partitions: int | None = None
) -> str:
    """Create the topic with the configured partitions and retention, if it does not exist."""
    from kafka.admin import NewTopic
    from kafka.errors import KafkaError, TopicAlreadyExistsError

    name = topic or settings.kafka.topic
    admin = _admin(settings)
    try:
        if name not in admin.list_topics():
            admin.create_topics(
                [
                    NewTopic(
                        name,
                        partitions or settings.kafka.partitions,
                        # The broker's default.replication.factor: 1 on the embedded broker,
                        # every broker of a cluster (infra/kafka/cluster.properties).
                        -1,
                        topic_configs={
                            "retention.ms": str(settings.kafka.retention_ms),
                            # The broker stamps each record on arrival: the future-event rule
                            # and lag use one clock that producers cannot skew.
                            "message.timestamp.type": "LogAppendTime",
                        },
                    )
                ]
            )
    except TopicAlreadyExistsError:
        pass  # created by someone else between our look and our create
    except KafkaError as err:  # e.g. a name or setting the broker refuses
        # kafka-python's message repeats the whole request and response; keep the broker's words.
        said = re.search(r"error_message=([\"'])(.+?)\1", str(err))
        raise KafkaUnavailableError(
            f"Kafka at {settings.kafka.bootstrap_servers} cannot create topic {name!r}: "
            f"{type(err).__name__}: {said.group(2) if said else err.description}"
        ) from None
    finally:
        admin.close()
    return name


def delete_topics(settings: Settings, prefix: str) -> list[str]:
    """Delete every topic whose name starts with `prefix` (tests' and benchmarks' own
    topics: each keeps its records forever, so without this the broker's disk only grows).
    Returns the names deleted, once the broker no longer lists them."""
    import time

    if not prefix:
        raise ValueError("a prefix is needed: deleting every topic is never what is meant")
    admin = _admin(settings)
    try:
        names = sorted(t for t in admin.list_topics() if t.startswith(prefix))
        if names:
            admin.delete_topics(names, timeout_ms=30_000)
        # The controller accepts a deletion before every broker's metadata forgets the topic.
        deadline = time.monotonic() + 30
        while set(names) & set(admin.list_topics()) and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        admin.close()
    return names


def produce_json(
    settings: Settings, records: Iterable[tuple[str, Mapping[str, Any]]], topic: str | None = None
) -> int:
    """Send (key, event) pairs as JSON, waiting for every acknowledgement. Returns the count."""
    from kafka import KafkaProducer

    producer = KafkaProducer(
        bootstrap_servers=settings.kafka.bootstrap_servers,
        acks="all",
        linger_ms=20,
        retries=5,
    )
    sent = 0
    try:
        futures = [
            producer.send(
                topic or settings.kafka.topic,
                key=key.encode(),
                value=json.dumps(value, separators=(",", ":")).encode(),
            )
            for key, value in records
        ]
        producer.flush()
        for future in futures:
            future.get(timeout=30)  # raises if any record was not acknowledged
            sent += 1
    finally:
        producer.close()
    return sent


def produce_records(
    settings: Settings,
    records: Iterable[tuple[bytes, bytes]],
    topic: str | None = None,
    max_in_flight: int = 10_000,
) -> Iterator[RecordMetadata]:
    """Send raw (key, value) records; yield each one's metadata once acknowledged, in order.

    Lazy on both sides, so a caller can pace the input and record the output as it goes
    without holding every record in memory. Raises as soon as a record is refused.
    """
    from kafka import KafkaProducer
    from kafka.errors import KafkaConnectionError, KafkaTimeoutError

    name = topic or settings.kafka.topic
    try:
        # Idempotence stops the producer's own retries from writing a record twice, which
        # would break any count of "records sent" against the log.
        producer = KafkaProducer(
            bootstrap_servers=settings.kafka.bootstrap_servers,
            acks="all",
            enable_idempotence=True,
            linger_ms=20,
            bootstrap_timeout_ms=int(settings.kafka.connect_timeout_seconds * 1000),
        )
    except (KafkaConnectionError, KafkaTimeoutError):
        raise KafkaUnavailableError(
            f"no Kafka broker at {settings.kafka.bootstrap_servers}: start it with `make up`"
        ) from None
    pending: deque[FutureRecordMetadata] = deque()
    try:
        for key, value in records:
            pending.append(producer.send(name, key=key, value=value))
            while pending and (pending[0].is_done or len(pending) > max_in_flight):
                yield pending.popleft().get(timeout=60)
        producer.flush()
        while pending:
            yield pending.popleft().get(timeout=60)
    finally:
        producer.close()
