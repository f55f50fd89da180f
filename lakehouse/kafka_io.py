"""Kafka plumbing shared by jobs and tests: topics and producers (kafka-python)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from lakehouse.config import Settings

if TYPE_CHECKING:
    from kafka import KafkaAdminClient


class KafkaUnavailableError(Exception):
    """The broker cannot be reached; the message says what to do."""


def _admin(settings: Settings) -> KafkaAdminClient:
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaConnectionError, KafkaTimeoutError

    try:
        return KafkaAdminClient(
            bootstrap_servers=settings.kafka.bootstrap_servers, request_timeout_ms=10_000
        )
    except (KafkaConnectionError, KafkaTimeoutError):
        raise KafkaUnavailableError(
            f"no Kafka broker at {settings.kafka.bootstrap_servers}: start it with `make up`"
        ) from None


def ensure_topic(
    settings: Settings, topic: str | None = None, partitions: int | None = None
) -> str:
    """Create the topic with the configured partitions and retention, if it does not exist."""
    from kafka.admin import NewTopic
    from kafka.errors import TopicAlreadyExistsError

    name = topic or settings.kafka.topic
    admin = _admin(settings)
    try:
        if name not in admin.list_topics():
            admin.create_topics(
                [
                    NewTopic(
                        name,
                        partitions or settings.kafka.partitions,
                        1,
                        topic_configs={"retention.ms": str(settings.kafka.retention_ms)},
                    )
                ]
            )
    except TopicAlreadyExistsError:
        pass  # created by someone else between our look and our create
    finally:
        admin.close()
    return name


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
