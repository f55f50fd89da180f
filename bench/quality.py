"""The silver Great Expectations suite on N events, against a hand-written one-pass baseline.

    .venv/bin/python -m bench.quality [--events 10000000]

Steps, in one SparkSession so the two timings compare like with like:
1. build --events synthetic silver rows with spark.range (no Kafka) and write them as a Delta
   table on local disk, with a few rows of each defect the suite looks for (so both sides
   must find the same counts, not just zeros);
2. suite: validate the table's snapshot with lakehouse.quality's silver suite (GX: a pass
   that counts every check, then one that fetches examples for the checks that broke);
3. baseline: the same checks as one Spark aggregation over the same snapshot.
Results are printed and written to bench/results/quality-<timestamp>.json.
"""

from __future__ import annotations

import argparse
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.report import save_results
from bench.synthetic import event_type, page, purchase_amount
from lakehouse.core import events as contract
from lakehouse.core.config import load_settings
from lakehouse.core.spark import get_spark
from lakehouse.quality.suites import EventTimeBounds, silver_events_suite
from lakehouse.quality.validate import validate_dataframe

START = datetime(2026, 3, 1, tzinfo=UTC)
BOUNDS = EventTimeBounds(START - timedelta(days=1), START + timedelta(days=2))
DEFECT_EVERY = 100_003  # a prime, so defects land on every kind of row


def synthetic_silver(spark: Any, events: int) -> Any:
    """Silver's columns over one day; every DEFECT_EVERY-th row carries one defect."""
    from pyspark.sql import functions as F

    i = F.col("id")
    defect = F.when(i % DEFECT_EVERY == 7, (i / DEFECT_EVERY).cast("long") % 5)
    kind = event_type(i)
    t = F.timestamp_micros(
        F.lit(int(START.timestamp() * 1e6)) + (i * (86_400_000_000 // max(events, 1)))
    )
    return (
        spark.range(events, numPartitions=4)
        .select(
            # defect 0: a duplicate event_id (the previous row's)
            F.concat(F.lit("e"), F.when(defect == 0, i - 1).otherwise(i).cast("string")).alias(
                "event_id"
            ),
            kind.alias("event_type"),
            # defect 1: a null key
            F.when(defect == 1, F.lit(None))
            .otherwise(F.concat(F.lit("u"), (i * 7919 % 50_000).cast("string")))
            .alias("user_id"),
            F.concat(F.lit("s"), (i % 100_000).cast("string")).alias("session_id"),
            page(i).alias("page"),
            F.concat(F.lit("p"), (i % 1000).cast("string")).alias("product_id"),
            # defect 2: a negative amount (on a purchase or not: amount is what is checked)
            F.when(defect == 2, F.lit(-1.0))
            .otherwise(purchase_amount(kind))
            .cast("decimal(18,2)")
            .alias("amount"),
            # defect 3: an event_time out of bounds
            F.when(defect == 3, F.lit(datetime(2030, 1, 1, tzinfo=UTC)))
            .otherwise(t)
            .alias("event_time"),
            # defect 4: sent an hour before it happened (a WARN)
            F.when(defect == 4, t - F.expr("INTERVAL 1 HOUR"))
            .otherwise(t + F.expr("INTERVAL 1 SECOND"))
            .alias("sent_at"),
            (i % 3).cast("int").alias("kafka_partition"),
            (i / 3).cast("long").alias("kafka_offset"),
            t.alias("kafka_timestamp"),
            t.alias("ingested_at"),
        )
        .withColumn("event_date", F.to_date("event_time"))
        .withColumn("arrived_late", F.lit(False))
    )


def baseline_counts(df: Any) -> dict[str, int]:
    """The silver suite's checks as one aggregation: unexpected rows per check."""
    from pyspark.sql import functions as F

    def count_if(condition: Any) -> Any:
        return F.sum(F.when(condition, 1).otherwise(0))

    checks = {f"{c}_not_null": F.col(c).isNull() for c in contract.REQUIRED_FIELDS}
    checks |= {
        "event_type_known": ~F.col("event_type").isin(*contract.EVENT_TYPES),
        "purchase_amount_not_null": (F.col("event_type") == "purchase") & F.col("amount").isNull(),
        "amount_not_negative": F.col("amount") < 0,
        "event_time_within_bounds": (F.col("event_time") < BOUNDS.earliest)
        | (F.col("event_time") > BOUNDS.latest),
        "kafka_partition_not_null": F.col("kafka_partition").isNull(),
        "kafka_offset_not_null": F.col("kafka_offset").isNull(),
        "sent_after_event_time": F.col("sent_at") < F.col("event_time"),
    }
    row = df.agg(
        *(count_if(c).alias(name) for name, c in checks.items()),
        F.count("event_id").alias("_ids"),
        F.count_distinct("event_id").alias("_distinct"),
    ).first()
    counts = {name: int(row[name] or 0) for name in checks}
    # GX counts every copy of a repeated id; here every duplicate is a pair, so the rows
    # involved are twice the surplus copies.
    counts["event_id_unique"] = 2 * (int(row["_ids"]) - int(row["_distinct"]))
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(
        allow_abbrev=False,
        prog="python -m bench.quality",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--events", type=int, default=10_000_000)
    args = parser.parse_args()

    run = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    root = Path(f"/tmp/tributary-bench/quality-{run}")
    spark = get_spark("bench-quality", load_settings("local"))
    results: dict[str, Any] = {"run": run, "events": args.events, "machine": "2 cores, 24 GiB"}

    print(f"==> writing {args.events} synthetic silver events to {root}", flush=True)
    began = time.monotonic()
    synthetic_silver(spark, args.events).write.format("delta").partitionBy("event_date").save(
        str(root / "silver")
    )
    results["write_seconds"] = round(time.monotonic() - began, 1)

    def snapshot() -> Any:
        return spark.read.format("delta").load(str(root / "silver"))

    print("==> suite: Great Expectations silver suite on the snapshot", flush=True)
    began = time.monotonic()
    got = validate_dataframe(snapshot(), silver_events_suite(BOUNDS), docs_dir=root / "data_docs")
    results["suite_seconds"] = round(time.monotonic() - began, 1)
    # Counting every check, then (only because this table has defects) fetching examples.
    results["suite_phase_seconds"] = got.seconds
    print(got.summary(), flush=True)

    print("==> baseline: the same checks as one hand-written aggregation", flush=True)
    began = time.monotonic()
    expected = baseline_counts(snapshot())
    results["baseline_seconds"] = round(time.monotonic() - began, 1)

    found = {c.check: c.unexpected_count for c in got.checks if c.check in expected}
    results["ratio_suite_to_baseline"] = round(
        results["suite_seconds"] / max(results["baseline_seconds"], 0.1), 1
    )
    results["suite_events_per_second"] = round(args.events / results["suite_seconds"])
    results["counts_agree"] = found == expected
    results["unexpected_counts"] = expected
    results["verdict"] = got.verdict.value
    if not results["counts_agree"]:
        results["suite_counts"] = found
    save_results("quality", run, results)


if __name__ == "__main__":
    main()
