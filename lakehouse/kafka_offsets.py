"""Where the log ends, per partition: the speed layer's lag and the replay's plans use it."""

from __future__ import annotations

from lakehouse.config import Settings


def end_offsets(settings: Settings, topic: str | None = None) -> dict[int, int]:
    """The next offset to be written, per partition of the topic."""
    from kafka import KafkaConsumer, TopicPartition

    name = topic or settings.kafka.topic
    consumer = KafkaConsumer(
        bootstrap_servers=settings.kafka.bootstrap_servers, request_timeout_ms=10_000
    )
    try:
        partitions = consumer.partitions_for_topic(name) or set()
        ends = consumer.end_offsets([TopicPartition(name, p) for p in sorted(partitions)])
    finally:
        consumer.close()
    return {tp.partition: int(offset) for tp, offset in ends.items()}
