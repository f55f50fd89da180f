"""Reconciliation cost, against a hand-written Spark comparison of the same tables.

    .venv/bin/python -m bench.reconcile [--events 10000000] [--days 2] [--users 20000]
                                        [--repeat 2]

1. build: synthetic accepted events (spark.range, no Kafka) spread over --days; 2% of them
   are "late": the batch views are computed from all events, the speed views from the
   others, and the late ones go to speed.late_events. ops.batch_runs and ops.speed_progress
   make every window final. All in a fresh local lakehouse under /tmp/tributary-bench/.
2. hand-written: per view, a full outer join of batch.<view> and speed.<view> on the keys,
   the differing keys counted and the first 50 collected (what one would write by hand; it
   does not explain anything by late events).
3. ours: lakehouse.reconcile.reconcile() batch vs speed (sides loaded, late events and
   closed windows taken into account, summary, first differing windows, chart series);
   and, timed apart, publishing it (dq.* records and the HTML report).
Both comparisons run --repeat times, alternately, in one SparkSession; the best of each is
kept. Results are printed and written to bench/results/reconcile-<timestamp>.json.
"""

from __future__ import annotations

import argparse
import os
import time
from datetime import UTC, datetime, timedelta
from functools import reduce
from typing import Any

from bench.report import save_results
from bench.synthetic import event_type, page, purchase_amount
from lakehouse.core.config import Settings, load_settings
from lakehouse.core.spark import get_spark
from lakehouse.core.tables import table
from lakehouse.transforms.views import VIEWS

LATE_EVERY = 50  # one event in 50 is late
SAMPLE = 50
JITTER_MICROS = 30 * 60 * 1_000_000
MEASURES = ("events", "amount_sum", "active_users", "revenue", "duration_seconds")


def bench_settings(run: str) -> Settings:
    root = f"/tmp/tributary-bench/reconcile-{run}"
    env = {
        **os.environ,
        "TRIBUTARY__STORAGE__ROOT": f"{root}/lakehouse",
        "TRIBUTARY__STORAGE__CHECKPOINTS": f"{root}/checkpoints",
        "TRIBUTARY_STATE": f"{root}/state",  # the report stays beside the tables
    }
    env.pop("TRIBUTARY_PROFILE", None)
    return load_settings("local", env)


def synthetic_events(spark: Any, events: int, days: int, users: int, end: datetime) -> Any:
    """Accepted events in silver's shape, `events` of them evenly over `days` before `end`."""
    from pyspark.sql import functions as F

    start_micros = int((end - timedelta(days=days)).timestamp() * 1e6)
    step_micros = days * 86_400_000_000 // events
    kind = event_type(F.col("id"))
    return spark.range(events, numPartitions=8).select(
        F.concat(F.lit("e"), F.col("id").cast("string")).alias("event_id"),
        kind.alias("event_type"),
        F.concat(F.lit("u"), (F.col("id") * 7919 % users).cast("string")).alias("user_id"),
        page(F.col("id")).alias("page"),
        purchase_amount(kind).cast("decimal(18,2)").alias("amount"),
        # Up to 30 min of jitter: a user's events are ~29 min apart on average (20k users,
        # 2M events, 2 days), so about half the gaps close a session.
        F.timestamp_micros(
            F.lit(start_micros)
            + F.col("id") * step_micros
            + F.abs(F.xxhash64("id")) % JITTER_MICROS
        ).alias("event_time"),
        (F.col("id") % LATE_EVERY == 7).alias("late"),
        (F.col("id") % 3).cast("int").alias("kafka_partition"),
        F.col("id").alias("kafka_offset"),
        F.lit(end).cast("timestamp").alias("kafka_timestamp"),
    )


def build(spark: Any, settings: Settings, events: int, days: int, users: int) -> dict[str, int]:
    """The batch, speed and late tables and the run/progress rows; rows per table."""
    from pyspark.sql import functions as F

    from lakehouse.core.tables import table

    end = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    start = end - timedelta(days=days)
    all_events = synthetic_events(spark, events, days, users, end).cache()
    on_time = all_events.where(~F.col("late"))
    sizes: dict[str, int] = {}

    def save(df: Any, name: str) -> None:
        df.write.format("delta").mode("overwrite").save(table(name).path(settings))
        sizes[name] = spark.read.format("delta").load(table(name).path(settings)).count()

    for v in VIEWS.values():
        save(v.compute(all_events), v.batch_table)
        save(v.compute(on_time), v.speed_table)
    save(all_events.where("late").drop("late"), "speed.late_events")
    all_events.unpersist()
    runs = [
        {
            "run_id": "bench",
            "view": name,
            "interval_start": start,
            "interval_end": end,
            "final_until": end,
            "rows": sizes[v.batch_table],
            "table_version": 0,
            "bronze_version": 0,
            "ingest_high_water": end + timedelta(days=1),
            "watermark": end + timedelta(days=1),
            "events": events,
            "started_at": end,
            "finished_at": end,
            "duration_seconds": 0.0,
        }
        for name, v in VIEWS.items()
    ]
    save(spark.createDataFrame(runs, table("ops.batch_runs").spark_schema()), "ops.batch_runs")
    watermark = int((end + timedelta(days=1)).timestamp() * 1e6)
    progress = spark.createDataFrame(
        [(end, watermark)], "processed_at timestamp, watermark_micros long"
    )
    save(progress, "ops.speed_progress")
    return sizes


def hand_written(spark: Any, settings: Settings) -> dict[str, Any]:
    """Full outer join per view; differing keys counted, the first ones collected."""
    from pyspark.sql import functions as F

    differing: dict[str, int] = {}
    began = time.monotonic()
    for v in VIEWS.values():
        batch = spark.read.format("delta").load(table(v.batch_table).path(settings)).alias("b")
        speed = spark.read.format("delta").load(table(v.speed_table).path(settings)).alias("s")
        joined = batch.join(speed, list(v.keys), "full_outer")
        measures = [m for m in MEASURES if m in batch.columns]
        differs = reduce(
            lambda a, b: a | b,
            [~F.col(f"b.{m}").eqNullSafe(F.col(f"s.{m}")) for m in measures],
        )
        if "users" in batch.columns:
            differs = differs | ~F.col("b.users").eqNullSafe(F.col("s.users"))
        rows = joined.where(differs)
        differing[v.name] = rows.count()
        rows.orderBy(*v.keys).limit(SAMPLE).collect()
    return {"seconds": time.monotonic() - began, "differing": differing}


def ours(spark: Any, settings: Settings) -> dict[str, Any]:
    from lakehouse.reconcile import batch_source, gate, publish, reconcile, speed_source

    began = time.monotonic()
    run = reconcile(
        spark, settings, batch_source(), speed_source(), list(VIEWS), "bench", datetime.now(UTC)
    )
    compared = time.monotonic() - began
    verdict = gate(run)
    began = time.monotonic()
    publish(spark, settings, run, verdict)
    published = time.monotonic() - began
    run.release()
    return {
        "seconds": compared,
        "publish_seconds": published,
        "views": {v.view: {**v.counts, "compared": v.compared} for v in run.views},
        "passed": verdict.passed,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        allow_abbrev=False,
        prog="python -m bench.reconcile",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--events", type=int, default=10_000_000)
    parser.add_argument("--days", type=int, default=2)
    parser.add_argument("--users", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()

    run = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    settings = bench_settings(run)
    spark = get_spark("bench-reconcile", settings)
    print(f"==> building the views of {args.events} events over {args.days} days", flush=True)
    began = time.monotonic()
    sizes = build(spark, settings, args.events, args.days, args.users)
    print(f"    {sizes} in {time.monotonic() - began:.0f} s", flush=True)

    baseline, reconciled = [], []
    for k in range(args.repeat):
        print(f"==> round {k + 1}: hand-written full outer join", flush=True)
        baseline.append(hand_written(spark, settings))
        print(f"    {baseline[-1]['seconds']:.1f} s", flush=True)
        print(f"==> round {k + 1}: lakehouse.reconcile", flush=True)
        reconciled.append(ours(spark, settings))
        print(
            f"    {reconciled[-1]['seconds']:.1f} s (+ {reconciled[-1]['publish_seconds']:.1f} s "
            "to publish)",
            flush=True,
        )
    best_base = min(baseline, key=lambda r: r["seconds"])
    best_ours = min(reconciled, key=lambda r: r["seconds"])
    results: dict[str, Any] = {
        "run": run,
        "events": args.events,
        "days": args.days,
        "users": args.users,
        "late_share": 1 / LATE_EVERY,
        "machine": f"{os.cpu_count()} cores, shared",
        "rows": sizes,
        "hand_written_seconds": round(best_base["seconds"], 2),
        "hand_written_differing_keys": best_base["differing"],
        "reconcile_seconds": round(best_ours["seconds"], 2),
        "reconcile_publish_seconds": round(best_ours["publish_seconds"], 2),
        "reconcile_views": best_ours["views"],
        "gate_passed": best_ours["passed"],
        "ratio": round(best_ours["seconds"] / best_base["seconds"], 2),
        "ratio_with_publish": round(
            (best_ours["seconds"] + best_ours["publish_seconds"]) / best_base["seconds"], 2
        ),
        "all_rounds": {
            "hand_written": [round(r["seconds"], 2) for r in baseline],
            "reconcile": [round(r["seconds"], 2) for r in reconciled],
            "publish": [round(r["publish_seconds"], 2) for r in reconciled],
        },
    }
    save_results("reconcile", run, results)


if __name__ == "__main__":
    main()
