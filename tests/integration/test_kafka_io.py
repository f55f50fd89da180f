"""Kafka round trip against the real broker: topic creation, produce, consume."""

from __future__ import annotations

import json
import logging
import time
from datetime import UTC, datetime

import pytest

from lakehouse.core.config import Settings
from lakehouse.core.kafka_io import KafkaUnavailableError, delete_topics, ensure_topic, produce_json
from lakehouse.generator.clickstream import generate_events


def test_produce_and_consume_round_trip(
    minio_settings: Settings, kafka_up: str, topic_name: str
) -> None:
    from kafka import KafkaConsumer, TopicPartition

    ensure_topic(minio_settings, topic_name, partitions=3)
    ensure_topic(minio_settings, topic_name, partitions=3)  # idempotent
    events = list(generate_events(300, seed=1, start=datetime(2026, 1, 1, tzinfo=UTC)))
    assert produce_json(minio_settings, events, topic=topic_name) == 300

    # Read each partition from its start to its end: what the log holds, all of it, once.
    consumer = KafkaConsumer(bootstrap_servers=kafka_up, enable_auto_commit=False)
    try:
        partitions = [TopicPartition(topic_name, p) for p in range(3)]
        consumer.assign(partitions)
        consumer.seek_to_beginning()
        ends = consumer.end_offsets(partitions)
        assert sum(ends.values()) == 300, "the log holds each record once"
        received = []
        deadline = time.monotonic() + 60
        while any(consumer.position(p) < ends[p] for p in partitions):
            assert time.monotonic() < deadline, f"read {len(received)} of 300 records in 60 s"
            for records in consumer.poll(timeout_ms=1000).values():
                received.extend(records)
    finally:
        consumer.close()

    assert sorted(json.loads(r.value)["event_id"] for r in received) == sorted(
        e["event_id"] for _, e in events
    )
    partitions_per_key: dict[str, set[int]] = {}
    for record in received:
        partitions_per_key.setdefault(record.key.decode(), set()).add(record.partition)
    assert all(len(p) == 1 for p in partitions_per_key.values()), (
        "a user's events must stay in order"
    )
    assert {r.partition for r in received} == {0, 1, 2}


def test_reading_the_log_s_bounds_logs_no_warning(
    minio_settings: Settings, kafka_up: str, topic_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The health check and the replay plans read offsets: no "group_id is None" warning."""
    from lakehouse.core.kafka_offsets import end_offsets

    ensure_topic(minio_settings, topic_name, partitions=2)
    produce_json(minio_settings, [("k", {"n": 1})], topic=topic_name)
    with caplog.at_level(logging.WARNING):
        assert sum(end_offsets(minio_settings, topic_name).values()) == 1
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


def test_topic_keeps_records_forever(
    minio_settings: Settings, kafka_up: str, topic_name: str
) -> None:
    from kafka import KafkaAdminClient
    from kafka.admin import ConfigResource, ConfigResourceType

    ensure_topic(minio_settings, topic_name)
    admin = KafkaAdminClient(bootstrap_servers=kafka_up)
    try:
        described = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic_name)])
    finally:
        admin.close()
    retention = described["topic"][topic_name]["retention.ms"]
    assert retention["value"] == "-1"
    assert retention["config_source"] == "DYNAMIC_TOPIC_CONFIG", "set on the topic, on purpose"


def test_delete_topics_takes_only_the_prefixed_ones(
    minio_settings: Settings, kafka_up: str, topic_name: str
) -> None:
    from kafka import KafkaAdminClient

    for suffix in ("a", "b"):
        ensure_topic(minio_settings, f"{topic_name}-gone-{suffix}")
    ensure_topic(minio_settings, f"{topic_name}-kept")

    deleted = delete_topics(minio_settings, f"{topic_name}-gone-")

    assert deleted == [f"{topic_name}-gone-a", f"{topic_name}-gone-b"]
    admin = KafkaAdminClient(bootstrap_servers=kafka_up)
    try:
        left = {t for t in admin.list_topics() if t.startswith(topic_name)}
    finally:
        admin.close()
    assert left == {f"{topic_name}-kept"}
    with pytest.raises(ValueError, match="prefix"):
        delete_topics(minio_settings, "")


def test_a_topic_the_broker_refuses_is_one_clear_error(
    minio_settings: Settings, kafka_up: str
) -> None:
    with pytest.raises(KafkaUnavailableError) as caught:
        ensure_topic(minio_settings, "..")
    assert str(caught.value) == (
        f"Kafka at {kafka_up} cannot create topic '..': "
        "InvalidTopicError: Topic name is invalid: '..' is not allowed"
    )
