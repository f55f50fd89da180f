"""The windowed stream-stream joins' throughput (input rows per second), each next to the same
pipeline without the join.

    .venv/bin/python -m bench.stream_joins [--commits 6] [--events-per-commit 20000]

Synthetic inputs, written by the bench as Delta tables, a commit at a time: silver.events
(4 clicks to a purchase, a user's events every 2.5 minutes, on one of 4 products in turn,
event time advancing 20 minutes a commit),
silver.order_events (an order placed per 8 events) and silver.payments (most orders paid
once within the hour, some twice, some after the hour, some never). Each query reads its two
sources one commit per micro-batch (maxFilesPerTrigger 1, a file per commit), so the join
state carries over from batch to batch and the watermark evicts it as event time advances.
The baseline is the same query with the join taken out: both sides' rows, selected as the
join selects them, appended by the same foreachBatch sink. The figure per join is its input
rows per second and its ratio to the baseline's; the join state's peak and final rows show it
stays bounded. Each pair runs twice (fresh checkpoints, the same inputs) and the second round
is reported: the first warms the JVM up. Results go to
bench/results/stream_joins-<timestamp>.json.
"""

from __future__ import annotations

import argparse
import json
import time
from datetime import UTC, datetime
from typing import Any

from bench.report import save_results
from bench.speed_layer import bench_settings
from lakehouse.core.config import Settings
from lakehouse.core.delta_io import appended_rows
from lakehouse.core.tables import JOINS, Table
from lakehouse.joins.windowed import (
    ATTRIBUTION_QUERY,
    EVENTS,
    ORDER_EVENTS,
    ORDER_PAYMENTS_QUERY,
    PAYMENTS,
    JoinQuery,
    JoinSink,
)

MINUTES_PER_COMMIT = 20
START = datetime(2026, 11, 25, 0, 0, tzinfo=UTC)


def write_inputs(spark: Any, settings: Settings, commits: int, events: int) -> None:
    """`commits` commits of each input table, each one file."""
    from pyspark.sql import functions as F

    start = int(START.timestamp())
    # A user's events come every `users` ids (2.5 minutes of event time), on one of 4
    # products in turn: a purchase finds about 2.4 of its user's clicks on its product in
    # the half hour before it. (A multiple of 5 would make a purchase's every predecessor
    # on its product a purchase too.)
    users = events // 8 + 1 if (events // 8) % 5 == 0 else max(1, events // 8)
    for commit in range(commits):
        base = commit * events
        seconds = F.lit(start + commit * MINUTES_PER_COMMIT * 60) + (F.col("id") - base) * F.lit(
            MINUTES_PER_COMMIT * 60.0 / events
        )
        rows = spark.range(base, base + events, numPartitions=1).select(
            F.concat(F.lit("e"), F.col("id")).alias("event_id"),
            F.when(F.col("id") % 5 == 0, "purchase").otherwise("click").alias("event_type"),
            F.concat(F.lit("u"), F.col("id") % users).alias("user_id"),
            F.lit("s").alias("session_id"),
            F.lit("/p").alias("page"),
            F.concat(F.lit("p"), (F.col("id") / users).cast("long") % 4).alias("product_id"),
            F.lit(3).cast("decimal(18,2)").alias("amount"),
            F.timestamp_seconds(seconds).alias("event_time"),
        )
        _append(rows, EVENTS, settings)
        orders = rows.where(F.col("id") % 8 == 0).select(
            F.concat(F.lit("placed-"), "event_id").alias("event_id"),
            F.concat(F.lit("o"), F.col("event_id")).alias("order_id"),
            "user_id",
            F.lit("placed").alias("type"),
            F.lit(30).cast("decimal(18,2)").alias("amount"),
            "event_time",
        )
        _append(orders, ORDER_EVENTS, settings)
        number = F.abs(F.hash("order_id")) % 20
        delay = F.when(number < 15, number * 200).when(number < 17, 4000).otherwise(None)
        paid = orders.where(number < 17).select(
            F.concat(F.lit("pay-"), "order_id").alias("payment_id"),
            "order_id",
            "amount",
            (F.col("event_time") + F.make_interval(secs=delay)).alias("paid_at"),
        )
        again = paid.where(number < 2).select(
            F.concat("payment_id", F.lit("-2")).alias("payment_id"),
            "order_id",
            "amount",
            (F.col("paid_at") + F.expr("INTERVAL 60 SECONDS")).alias("paid_at"),
        )
        _append(paid.unionByName(again), PAYMENTS, settings)


def _append(rows: Any, target: Table, settings: Settings) -> None:
    from pyspark.sql import functions as F

    declared = target.spark_schema()
    full = rows.select(
        *(
            F.col(f.name).cast(f.dataType)
            if f.name in rows.columns
            else F.lit(None).cast(f.dataType)
            for f in declared.fields
        )
    ).toDF(*declared.fieldNames())
    full.coalesce(1).write.format("delta").mode("append").save(target.path(settings))


def baseline_query(query: JoinQuery) -> JoinQuery:
    """The query with the join taken out: both sides' selected rows, as one frame."""

    def no_join(left: Any, right: Any, window: int) -> Any:
        return left.unionByName(right, allowMissingColumns=True)

    return JoinQuery(
        f"{query.name}_baseline", query.output, query.left, query.right, no_join, query.window
    )


def run_query(
    spark: Any, settings: Settings, query: JoinQuery, watermarked: bool, round_: int
) -> dict:
    """Run `query` over everything the inputs hold, a commit per batch; its figures."""
    one_commit = {"maxFilesPerTrigger": "1"}
    left = appended_rows(spark, query.left.source, settings, one_commit)
    right = appended_rows(spark, query.right.source, settings, one_commit)
    joined = query.join(left, right, settings, watermarked)
    fields = ", ".join(f"`{f.name}` {f.dataType.simpleString()}" for f in joined.schema.fields)
    output = Table(
        f"bench.{query.name}_{round_}", JOINS, "bench output", f"{fields}, batch_id bigint"
    )
    checkpoint = f"{settings.storage.checkpoints}/{JOINS}/{query.name}-{round_}"
    sink = JoinSink(settings, JoinQuery(query.name, output, *_rest(query)), checkpoint)
    started = time.monotonic()
    running = (
        joined.writeStream.foreachBatch(sink)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    running.awaitTermination()
    seconds = time.monotonic() - started
    reports = [json.loads(p.json) for p in running.recentProgress]
    rows = sum(int(r["numInputRows"]) for r in reports)
    states = [sum(int(s["numRowsTotal"]) for s in r.get("stateOperators") or []) for r in reports]
    return {
        "seconds": round(seconds, 2),
        "input_rows": rows,
        "output_rows": sum(sink.output_rows.values()),
        "rows_per_second": round(rows / seconds, 1),
        "batches": len(reports),
        "state_rows_peak": max(states, default=0),
        "state_rows_final": states[-1] if states else 0,
    }


def _rest(query: JoinQuery) -> tuple[Any, ...]:
    return (query.left, query.right, query.combine, query.window)


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.stream_joins",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--commits", type=int, default=6)
    parser.add_argument("--events-per-commit", type=int, default=20000)
    args = parser.parse_args()
    from lakehouse.core.spark import get_spark

    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    name = f"stream_joins-{stamp}"
    settings = bench_settings("local", "bench-stream-joins", name)
    spark = get_spark("bench-stream-joins", settings)
    spark.conf.set("spark.sql.streaming.numRecentProgressUpdates", "1000")
    started = time.monotonic()
    write_inputs(spark, settings, args.commits, args.events_per_commit)
    print(f"inputs written in {time.monotonic() - started:.1f}s")
    result: dict[str, Any] = {
        "commits": args.commits,
        "events_per_commit": args.events_per_commit,
        "watermark_delay_seconds": settings.joins.watermark_delay_seconds,
        "shuffle_partitions": spark.conf.get("spark.sql.shuffle.partitions"),
    }
    for query in (ATTRIBUTION_QUERY, ORDER_PAYMENTS_QUERY):
        for round_ in (1, 2):
            baseline = run_query(spark, settings, baseline_query(query), False, round_)
            joined = run_query(spark, settings, query, True, round_)
        result[query.name] = {
            "baseline": baseline,
            "join": joined,
            "throughput_vs_baseline": round(
                joined["rows_per_second"] / baseline["rows_per_second"], 3
            ),
        }
        print(f"{query.name}: {json.dumps(result[query.name])}")
    save_results("stream_joins", stamp, result)


if __name__ == "__main__":
    main()
