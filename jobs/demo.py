"""The end-to-end slice `make demo` runs: Kafka -> Spark Structured Streaming -> Delta.

    python -m jobs.demo [--events N] [--seed S]

1. creates the events topic (if needed) and produces N JSON events with kafka-python;
2. runs a streaming query (trigger availableNow) from the topic into demo.events_raw;
3. reads the table back in batch and prints the counts;
4. says where to look: the table, the Airflow UI and where its password is.

The speed, batch and replay layers replace this slice; it stays small on purpose.
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import UTC, datetime

from lakehouse.config import ConfigError, Settings, get_settings
from lakehouse.delta_io import (
    append_stream_available_now,
    read_kafka_stream,
    read_table,
    table_exists,
)
from lakehouse.generator import generate_events
from lakehouse.kafka_io import KafkaUnavailableError, ensure_topic, produce_json
from lakehouse.secrets import secrets_file
from lakehouse.spark import SparkSetupError, get_spark
from lakehouse.storage import StorageError, ensure_bucket
from lakehouse.tables import table
from lakehouse.transforms.bronze import to_raw_records

# Events are stamped from a fixed instant so a given seed always produces the same events.
DEMO_START = datetime(2026, 1, 1, tzinfo=UTC)


def run(settings: Settings, events: int, seed: int) -> dict[str, int]:
    raw = table("demo.events_raw")
    if settings.storage.on_s3:
        ensure_bucket(settings)

    topic = ensure_topic(settings)
    print(
        f"==> producing {events} events to Kafka topic {topic!r} "
        f"at {settings.kafka.bootstrap_servers}",
        flush=True,
    )
    produced = produce_json(settings, generate_events(events, seed=seed, start=DEMO_START))

    print("==> starting Spark (first start takes ~10s)", flush=True)
    spark = get_spark("demo", settings)
    before = read_table(spark, raw, settings).count() if table_exists(spark, raw, settings) else 0

    print(f"==> streaming the topic into {raw.name} (trigger availableNow)", flush=True)
    started = time.monotonic()
    query = append_stream_available_now(
        read_kafka_stream(spark, settings).transform(to_raw_records), raw, "ingest", settings
    )
    query.awaitTermination()
    took = time.monotonic() - started

    rows = read_table(spark, raw, settings)
    total = rows.count()
    per_partition = {
        r["partition"]: r["count"] for r in rows.groupBy("partition").count().collect()
    }
    counts = {"produced": produced, "ingested_now": total - before, "table_rows": total}
    print(f"==> streamed {total - before} new records in {took:.1f}s")
    print(f"    {raw.name}: {total} rows at {raw.path(settings)}")
    print(
        "    rows per Kafka partition: "
        + ", ".join(f"{p}={n}" for p, n in sorted(per_partition.items()))
    )
    return counts


def print_where_to_look(settings: Settings) -> None:
    print("\nWhere to look:")
    print(
        f"  Airflow UI   {settings.airflow.url}  (user {settings.airflow.admin_user}, "
        f"password: AIRFLOW_ADMIN_PASSWORD in {secrets_file()})"
    )
    print(f"  Lakehouse    {settings.storage.root}")
    print("  Services     make status    (logs are listed there)")
    print("  Stop all     make down")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m jobs.demo",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--events", type=int, default=5000, help="how many events to produce")
    parser.add_argument("--seed", type=int, default=7, help="random seed of the generator")
    args = parser.parse_args(argv)
    if not 1 <= args.events <= 10_000_000:
        parser.error("--events must be between 1 and 10000000")
    try:
        settings = get_settings()
        run(settings, args.events, args.seed)
    except (ConfigError, KafkaUnavailableError, SparkSetupError, StorageError) as err:
        print(f"demo failed: {err}", file=sys.stderr)
        return 1
    print_where_to_look(settings)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
