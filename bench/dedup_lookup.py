"""What does a micro-batch's dedup cost as silver grows?

    .venv/bin/python -m bench.dedup_lookup [--silver 1000000 10000000] [--batch-events 1000]
                                           [--batches 7] [--redelivered 10]

For each silver size (and a baseline silver of --batch-events events), a silver table is
written on local disk (event times spread over ten days, in time order as a stream appends
them), then the speed layer's dedup
(`MicroBatchProcessor.new_events`) runs on --batches micro-batches of --batch-events accepted
events, --redelivered of them re-deliveries of silver's events with another event_time. The
figures: the event_id index's build from silver (once per stream start), the median batch's
dedup (index lookup, the read of the found ids' rows, the new events counted) and its ratio
over the baseline's, after a warm-up batch; the baseline is measured first (to warm the JVM
up) and again last, and the ratios are over the last.
Results go to bench/results/dedup_lookup-<run>.json.
"""

from __future__ import annotations

import argparse
import statistics
import time
from datetime import UTC, datetime
from typing import Any

from bench.report import save_results
from bench.speed_layer import bench_settings
from lakehouse.core.delta_io import append_once, table_version
from lakehouse.speed import seen_events
from lakehouse.speed.batch_state import PinnedState
from lakehouse.speed.micro_batch import MicroBatchProcessor
from lakehouse.speed.outputs import SpeedOutputs
from lakehouse.speed.seen_events import seen_in

DAYS = 10
OUT = SpeedOutputs.live()


def events(spark: Any, first: int, count: int, shift_seconds: int = 0) -> Any:
    """`count` accepted events in silver's shape, ids e<first>.., over DAYS days of event
    time (shifted by `shift_seconds`)."""
    from pyspark.sql import functions as F

    start = int(datetime(2026, 11, 1, tzinfo=UTC).timestamp())
    spread = DAYS * 86_400
    at = F.timestamp_seconds(F.lit(start + shift_seconds) + (F.col("id") * 7919) % spread)
    return spark.range(first, first + count).select(
        F.format_string("e%012d", "id").alias("event_id"),
        F.lit("click").alias("event_type"),
        F.format_string("u%04d", F.col("id") % 5000).alias("user_id"),
        F.lit(None).cast("string").alias("session_id"),
        F.lit("/").alias("page"),
        F.lit("p1").alias("product_id"),
        F.lit(None).cast("decimal(18,2)").alias("amount"),
        at.alias("event_time"),
        at.alias("sent_at"),
        F.to_date(at).alias("event_date"),
        F.lit(0).alias("kafka_partition"),
        F.col("id").alias("kafka_offset"),
        at.alias("kafka_timestamp"),
        at.alias("ingested_at"),
    )


def measure(spark: Any, size: int, args: argparse.Namespace, stamp: str) -> dict[str, Any]:
    from pyspark.sql import functions as F

    settings = bench_settings("local", "bench-dedup", f"dedup-{stamp}-{size}")
    # In event-time order, as a stream appends it: each file holds a narrow range of times.
    silver = events(spark, 0, size).withColumn("arrived_late", F.lit(False)).orderBy("event_time")
    began = time.monotonic()
    append_once(silver, OUT.silver, settings, "bench", 0)
    written = time.monotonic() - began
    version = table_version(spark, OUT.silver, settings)
    stored = spark.read.format("delta").load(OUT.silver.path(settings))

    began = time.monotonic()
    index = seen_in(stored, version)
    built = time.monotonic() - began

    processor = MicroBatchProcessor(settings, OUT, "unused")
    processor._seen = index
    pinned = PinnedState(silver_version=version)
    seconds = []
    for batch in range(args.batches + 1):
        first = size + batch * args.batch_events
        new = events(spark, first, args.batch_events - args.redelivered)
        again = events(spark, batch * 97, args.redelivered, shift_seconds=3_600)
        accepted = new.unionByName(again).localCheckpoint()
        began = time.monotonic()
        found = processor.new_events(spark, accepted, pinned).new.count()
        seconds.append(time.monotonic() - began)
        assert found == args.batch_events - args.redelivered, found
    median = statistics.median(seconds[1:])
    print(f"silver {size:,}: index built in {built:.1f} s, median batch dedup {median:.3f} s")
    return {
        "silver_events": size,
        "silver_write_seconds": round(written, 1),
        "index_build_seconds": round(built, 2),
        "index_bytes": 8 * len(seen_events.HELD) * len(index),
        "batch_seconds": [round(s, 3) for s in seconds],
        "median_batch_seconds": round(median, 3),
    }


def main(argv: list[str] | None = None) -> None:
    from lakehouse.core.spark import get_spark

    parser = argparse.ArgumentParser(prog="python -m bench.dedup_lookup", description=__doc__)
    parser.add_argument("--silver", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--batch-events", type=int, default=1_000)
    parser.add_argument("--batches", type=int, default=7)
    parser.add_argument("--redelivered", type=int, default=10)
    args = parser.parse_args(argv)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    spark = get_spark("bench-dedup", bench_settings("local", "bench-dedup", f"dedup-{stamp}"))
    # The baseline runs first to warm the JVM up, and again last: the ratios are over that one.
    warm_up = measure(spark, args.batch_events, args, stamp)
    sizes = [measure(spark, size, args, stamp) for size in args.silver]
    baseline = measure(spark, args.batch_events, args, f"{stamp}-again")
    for result in sizes:
        result["batch_ratio_to_baseline"] = round(
            result["median_batch_seconds"] / baseline["median_batch_seconds"], 2
        )
    save_results(
        "dedup_lookup",
        stamp,
        {"args": vars(args), "warm_up": warm_up, "baseline": baseline, "sizes": sizes},
    )


if __name__ == "__main__":
    main()
