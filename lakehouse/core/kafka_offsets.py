"""Where the log starts and ends, per partition: the speed layer's lag and the replay's plans
use it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING

from lakehouse.core.config import Settings
from lakehouse.core.kafka_io import connect

if TYPE_CHECKING:
    from kafka import KafkaConsumer


class UnknownTopicError(LookupError):
    """The topic does not exist on the broker."""


@contextmanager
def _consumer(settings: Settings) -> Iterator[KafkaConsumer]:
    from kafka import KafkaConsumer

    # It reads offsets, never records, and belongs to no group: nothing to commit (left on,
    # kafka-python turns it off with a warning, in every health check's log).
    consumer = connect(settings, KafkaConsumer, enable_auto_commit=False)
    try:
        yield consumer
    finally:
        consumer.close()


def end_offsets(settings: Settings, topic: str | None = None) -> dict[int, int]:
    """The next offset to be written, per partition of the topic."""
    from kafka import TopicPartition

    name = topic or settings.kafka.topic
    with _consumer(settings) as consumer:
        partitions = consumer.partitions_for_topic(name) or set()
        ends = consumer.end_offsets([TopicPartition(name, p) for p in sorted(partitions)])
    return {tp.partition: int(offset) for tp, offset in ends.items()}


def log_bounds(settings: Settings, topic: str) -> dict[int, tuple[int, int]]:
    """Per partition: (earliest offset still held, next offset to be written)."""
    from kafka import TopicPartition

    with _consumer(settings) as consumer:
        partitions = consumer.partitions_for_topic(topic)
        if not partitions:
            raise UnknownTopicError(f"topic {topic!r} does not exist on the broker")
        tps = [TopicPartition(topic, p) for p in sorted(partitions)]
        starts = consumer.beginning_offsets(tps)
        ends = consumer.end_offsets(tps)
    return {tp.partition: (int(starts[tp]), int(ends[tp])) for tp in tps}


def offsets_at(settings: Settings, topic: str, moment: datetime) -> dict[int, int]:
    """Per partition, the first offset whose Kafka timestamp is at or after `moment` (the
    end of the partition when there is none)."""
    from kafka import TopicPartition

    bounds = log_bounds(settings, topic)
    millis = int(moment.timestamp() * 1000)
    with _consumer(settings) as consumer:
        found = consumer.offsets_for_times({TopicPartition(topic, p): millis for p in bounds})
    return {
        tp.partition: (int(hit.offset) if hit is not None else bounds[tp.partition][1])
        for tp, hit in found.items()
    }
