"""Batch-layer recompute time, against a plain scan-and-count of the same bronze table.

    .venv/bin/python -m bench.batch_layer [--events 10000000] [--storage local]

Steps, in one process and one SparkSession so the ratio compares like with like:
1. load: write --events Kafka-shaped records (JSON values, 1% duplicate deliveries) spread
   over one day of event time straight into a fresh bronze.events_raw (no Kafka: the batch
   layer only ever reads bronze);
2. baseline: read bronze and count the records with a value (every value byte is read);
   floors: read bronze and parse every record's JSON, nothing else; then read, parse,
   validate and deduplicate, no view and no write (bench.floors);
3. batch: recompute the whole day (parse, validate, dedup, the three views, replaceWhere);
4. rerun: the same interval again (what a retry or backfill costs).
Results are printed and written to bench/results/batch_layer-<timestamp>.json.
"""

from __future__ import annotations

import argparse
import os
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from bench.floors import deduplicated_seconds, parse_only_seconds
from bench.report import save_results
from bench.synthetic import MICROS, event_json, event_type, page
from lakehouse.batch.recompute import Interval, recompute_interval
from lakehouse.core.config import Settings, load_settings
from lakehouse.core.spark import get_spark
from lakehouse.core.tables import table


def bench_settings(storage: str, run: str) -> Settings:
    root = f"s3a://tributary/bench/{run}" if storage == "minio" else f"/tmp/tributary-bench/{run}"
    env = {
        **os.environ,
        "TRIBUTARY__STORAGE__ROOT": f"{root}/lakehouse",
        "TRIBUTARY__STORAGE__CHECKPOINTS": f"{root}/checkpoints",
    }
    env.pop("TRIBUTARY_PROFILE", None)
    return load_settings(storage, env)


def load_bronze(spark: Any, settings: Settings, events: int, day: Interval) -> float:
    """Write the records; returns seconds."""
    from pyspark.sql import functions as F

    step_us = int((day.end - day.start).total_seconds() * 1e6 / events)
    start_us = int(day.start.timestamp() * 1e6)
    # Every 100th record re-delivers the one before it (same event_id, later offset).
    event_no = F.when(F.col("id") % 100 == 99, F.col("id") - 1).otherwise(F.col("id"))
    events_df = spark.range(events, numPartitions=8).select(
        "id",
        event_no.alias("n"),
    )
    t = F.timestamp_micros(F.lit(start_us) + F.col("n") * step_us)
    fields = events_df.select(
        "id",
        F.concat(F.lit("u"), (F.col("n") * 7919 % 20000).cast("string")).alias("user_id"),
        F.concat(F.lit("e"), F.col("n").cast("string")).alias("event_id"),
        event_type(F.col("n")).alias("event_type"),
        page(F.col("n")).alias("page"),
        t.alias("t"),
    )
    bronze = fields.select(
        F.col("user_id").cast("binary").alias("key"),
        event_json(MICROS).cast("binary").alias("value"),
        F.lit("events").alias("topic"),
        (F.col("id") % 3).cast("int").alias("partition"),
        (F.col("id") / 3).cast("long").alias("offset"),
        (F.col("t") + F.expr("INTERVAL 2 SECONDS")).alias("kafka_timestamp"),
        F.current_timestamp().alias("ingested_at"),
    )
    began = time.monotonic()
    bronze.write.format("delta").save(table("bronze.events_raw").path(settings))
    return time.monotonic() - began


def scan_and_count(spark: Any, settings: Settings) -> tuple[float, int]:
    from pyspark.sql import functions as F

    began = time.monotonic()
    raw = spark.read.format("delta").load(table("bronze.events_raw").path(settings))
    count = raw.where(F.octet_length("value") > 0).count()
    return time.monotonic() - began, count


def main() -> None:
    parser = argparse.ArgumentParser(
        allow_abbrev=False,
        prog="python -m bench.batch_layer",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--events", type=int, default=10_000_000)
    parser.add_argument("--storage", default="local", choices=["local", "minio"])
    args = parser.parse_args()

    run = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    settings = bench_settings(args.storage, f"batch-{run}")
    spark = get_spark("bench-batch", settings)
    midnight = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    day = Interval(midnight - timedelta(days=2), midnight - timedelta(days=1))
    results: dict[str, Any] = {
        "run": run,
        "events": args.events,
        "storage": args.storage,
        "machine": "2 cores, 24 GiB",
    }

    print(f"==> loading {args.events} records into bronze ({args.storage})", flush=True)
    results["load_seconds"] = round(load_bronze(spark, settings, args.events, day), 1)
    print("==> baseline: scan and count bronze", flush=True)
    seconds, count = scan_and_count(spark, settings)
    results["scan_count_seconds"] = round(seconds, 1)
    assert count == args.events, (count, args.events)
    print("==> floor: read and parse every record, nothing else", flush=True)
    bronze = spark.read.format("delta").load(table("bronze.events_raw").path(settings))
    parse_seconds = parse_only_seconds(bronze)
    results["parse_only_seconds"] = round(parse_seconds, 1)
    results["parse_only_ratio_to_scan"] = round(parse_seconds / seconds, 2)
    print("==> floor: read, parse, validate and deduplicate, no view, no write", flush=True)
    dedup_seconds = deduplicated_seconds(bronze, settings)
    results["deduplicated_seconds"] = round(dedup_seconds, 1)
    results["deduplicated_ratio_to_scan"] = round(dedup_seconds / seconds, 2)
    for name in ("recompute", "rerun"):
        print(f"==> batch layer: {name} {day}", flush=True)
        batch = recompute_interval(spark, settings, day, f"bench-{name}")
        results[f"{name}_seconds"] = round(batch.seconds, 1)
        results[f"{name}_ratio_to_scan"] = round(batch.seconds / seconds, 2)
        results[f"{name}_events"] = batch.events
        print(f"    {batch.summary()}", flush=True)
    save_results("batch_layer", run, results)


if __name__ == "__main__":
    main()
