"""Speed-layer throughput and freshness, against the same Spark's raw read rate of the topic.

    .venv/bin/python -m bench.speed_layer [--events 1000000] [--storage local minio]
                                          [--sustain-rate 100 250 500] [--sustain-seconds 300]
                                          [--sustain-storage local minio]

Steps, all in one process and one SparkSession so the ratios compare like with like:
1. load: write --events JSON events into a fresh topic with Spark's Kafka writer (kafka-python
   tops out near 10k events/s, too slow to find the speed layer's limit);
2. baseline: read the whole topic with Structured Streaming (availableNow) and only count it;
   floors: the same stream, each micro-batch read, parsed, validated and deduplicated within
   itself, no view and no write (bench.floors): no speed layer can be faster; then the same
   plus two plain Delta appends per batch (its raw records, its new events); then plus the
   least the other outputs need (three per-batch views and a progress row, appended), with
   those four appends through Spark, then (as the speed layer commits them) through delta-rs;
3. catch-up: run the speed layer (availableNow) over the same topic, once per storage, with
   fresh tables: the highest rate it can sustain is at most this throughput;
4. sustained: once the speed layer runs (its first batch done), produce at --sustain-rate
   events/s in real time (a process of its own) for --sustain-seconds, per --sustain-storage,
   and report freshness p50/p99 and the lag trend from ops.speed_progress. The first
   --warm-up-seconds of batches (a new JVM's first batches compile and load classes; a stream
   that runs for days pays that once) are reported apart from the steady state, and so are
   the batches that start after the producer's last record (their records age while the
   stream waits for more). With several rates, each runs on a fresh topic and lakehouse, and
   the result names the highest rate that met the goal (p99 freshness under 5 s, the lag not
   growing).
Results are printed and written to bench/results/speed_layer-<timestamp>.json.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.floors import deduplicated_events, deduplicated_seconds
from bench.report import save_results
from bench.synthetic import event_json, event_type, page
from lakehouse.core.config import Settings, load_settings
from lakehouse.core.kafka_io import ensure_topic
from lakehouse.core.spark import get_spark
from lakehouse.speed.outputs import SpeedOutputs

OUT = SpeedOutputs.live()


def bench_settings(storage: str, topic: str, run: str, **speed: Any) -> Settings:
    import os

    root = f"s3a://tributary/bench/{run}" if storage == "minio" else f"/tmp/tributary-bench/{run}"
    env = {
        **os.environ,
        "TRIBUTARY__KAFKA__TOPIC": topic,
        "TRIBUTARY__STORAGE__ROOT": f"{root}/lakehouse",
        "TRIBUTARY__STORAGE__CHECKPOINTS": f"{root}/checkpoints",
    }
    env.update({f"TRIBUTARY__SPEED__{k.upper()}": str(v) for k, v in speed.items()})
    env.pop("TRIBUTARY_PROFILE", None)
    return load_settings(storage, env)


def load_topic(spark: Any, settings: Settings, events: int) -> float:
    """Write `events` JSON events spread over the last hour; returns events/s."""
    from pyspark.sql import functions as F

    ensure_topic(settings)
    start = datetime.now(UTC) - timedelta(hours=1)
    step_ms = 3_600_000 / events
    n = F.col("id")
    df = (
        spark.range(events, numPartitions=4)
        .select(
            F.concat(F.lit("u"), (n * 7919 % 5000).cast("string")).alias("user_id"),
            F.expr("uuid()").alias("event_id"),
            event_type(n).alias("event_type"),
            page(n).alias("page"),
            F.timestamp_micros(
                F.lit(int(start.timestamp() * 1e6)) + (n * step_ms * 1000).cast("long")
            ).alias("t"),
        )
        .select(F.col("user_id").alias("key"), event_json().alias("value"))
    )
    began = time.monotonic()
    (
        df.write.format("kafka")
        .option("kafka.bootstrap.servers", settings.kafka.bootstrap_servers)
        .option("topic", settings.kafka.topic)
        .save()
    )
    return events / (time.monotonic() - began)


def drain_rate(
    spark: Any,
    settings: Settings,
    run: str,
    name: str,
    per_batch: Callable[[Any], None] | None = None,
) -> float:
    """Events/s of a stream over the whole topic (availableNow, the speed layer's batch size)
    that counts each micro-batch, runs `per_batch` on it if given, and does nothing else."""
    from lakehouse.core.delta_io import read_kafka_stream

    counted = [0]

    def each(batch: Any, batch_id: int) -> None:
        if per_batch is None:
            counted[0] += batch.count()
            return
        batch = batch.persist()  # counted and processed from one read, as the speed layer does
        try:
            counted[0] += batch.count()
            per_batch(batch)
        finally:
            batch.unpersist()

    began = time.monotonic()
    (
        read_kafka_stream(
            spark, settings, max_offsets_per_trigger=settings.speed.max_offsets_per_trigger
        )
        .writeStream.foreachBatch(each)
        .trigger(availableNow=True)
        .option("checkpointLocation", f"/tmp/tributary-bench/{run}/{name}-checkpoint")
        .start()
        .awaitTermination()
    )
    return counted[0] / (time.monotonic() - began)


def raw_read_rate(spark: Any, settings: Settings, run: str) -> float:
    """Kafka -> count, no sinks: the baseline."""
    return drain_rate(spark, settings, run, "raw-read")


def floor_rate(spark: Any, settings: Settings, run: str) -> float:
    """Each micro-batch only read, parsed, validated and deduplicated
    (bench.floors.deduplicated_seconds), then discarded."""
    from lakehouse.transforms.bronze import to_raw_records

    def first_steps(batch: Any) -> None:
        deduplicated_seconds(batch.transform(to_raw_records), settings)

    return drain_rate(spark, settings, run, "floor", first_steps)


def appends_floor_rate(spark: Any, settings: Settings, run: str) -> float:
    """Each micro-batch parsed, validated and deduplicated within itself, then two plain
    Delta appends side by side: its raw records and its new events. Two of the kinds of table
    the speed layer must write (no quarantine, late events, views or progress, no dedup
    against earlier batches, no exactly-once bookkeeping)."""
    from concurrent.futures import ThreadPoolExecutor

    from lakehouse.transforms.bronze import to_raw_records

    folder = f"/tmp/tributary-bench/{run}/appends-floor"

    def append(df: Any, name: str) -> None:
        df.write.format("delta").mode("append").save(f"{folder}/{name}")

    def two_appends(batch: Any) -> None:
        raw = batch.transform(to_raw_records)
        with ThreadPoolExecutor(2) as pool:
            writes = [
                pool.submit(append, raw, "raw"),
                pool.submit(append, deduplicated_events(raw, settings), "events"),
            ]
            for done in writes:
                done.result()

    return drain_rate(spark, settings, run, "appends-floor", two_appends)


def tables_floor_rate(
    spark: Any, settings: Settings, run: str, few_rows_by_delta_rs: bool = False
) -> float:
    """The appends floor, plus the least that the issue's other per-batch outputs need: each
    of the three views computed over the batch's own new events alone (no earlier window or
    session read back, no MERGE) and appended, and a one-row progress append. Six plain
    appends per batch, `speed.write_threads` at a time, as the speed layer runs its writes;
    the new events are computed once (cached), not once per table. Quarantine and late
    events are left out (a stream without either would write neither). With
    `few_rows_by_delta_rs`, the views' rows and the progress row (a few rows each) are
    collected and committed by delta-rs, as the speed layer commits them."""
    from concurrent.futures import ThreadPoolExecutor

    import pyarrow as pa
    from deltalake import write_deltalake

    from lakehouse.transforms.bronze import to_raw_records
    from lakehouse.transforms.sessions import sessionize
    from lakehouse.transforms.windows import active_users_per_page, count_events_per_minute

    floor = "tables-floor" + ("-delta-rs" if few_rows_by_delta_rs else "")
    folder = f"/tmp/tributary-bench/{run}/{floor}"
    few_rows = {"counts", "active_users", "sessions"} if few_rows_by_delta_rs else set()

    def append(df: Any, name: str) -> None:
        if name in few_rows:
            write_deltalake(f"{folder}/{name}", df.toArrow(), mode="append")
        else:
            df.write.format("delta").mode("append").save(f"{folder}/{name}")

    def six_appends(batch: Any) -> None:
        raw = batch.transform(to_raw_records)
        new = deduplicated_events(raw, settings).persist()
        try:
            new_events = new.count()  # fills the cache before the writes share it
            outputs = {
                "raw": raw,
                "events": new,
                "counts": count_events_per_minute(new),
                "active_users": active_users_per_page(new),
                "sessions": sessionize(new),
            }
            with ThreadPoolExecutor(settings.speed.write_threads) as pool:
                for done in [pool.submit(append, df, name) for name, df in outputs.items()]:
                    done.result()
            if few_rows_by_delta_rs:
                progress = pa.table({"new_events": pa.array([new_events], pa.int64())})
                write_deltalake(f"{folder}/progress", progress, mode="append")
            else:
                append(spark.createDataFrame([(new_events,)], "new_events long"), "progress")
        finally:
            new.unpersist()

    return drain_rate(spark, settings, run, floor, six_appends)


def speed_catch_up(spark: Any, settings: Settings) -> dict[str, Any]:
    from lakehouse.speed.stream import start_query

    began = time.monotonic()
    start_query(spark, settings, OUT, available_now=True).awaitTermination()
    seconds = time.monotonic() - began
    progress = spark.read.format("delta").load(OUT.progress.path(settings)).toPandas()
    consumed = int(progress["input_rows"].sum())
    return {
        "events": consumed,
        "seconds": round(seconds, 1),
        "events_per_second": round(consumed / seconds),
        "batches": len(progress),
        "median_batch_seconds": round(float(progress["duration_seconds"].median()), 2),
    }


def sustained(
    spark: Any, settings: Settings, rate: float, seconds: float, warm_up: float
) -> dict[str, Any]:
    """Produce at `rate` events/s while the stream runs; freshness and lag from progress."""
    import pandas as pd

    from lakehouse.generator.clickstream import GeneratorConfig, produce
    from lakehouse.speed.stream import start_query

    ensure_topic(settings)
    query = start_query(spark, settings, OUT, available_now=False)
    # Load arrives at a running stream: its first batch, which creates its tables, comes first.
    deadline = time.monotonic() + 300
    while query.lastProgress is None and query.isActive and time.monotonic() < deadline:
        time.sleep(0.5)
    if query.lastProgress is None:
        raise SystemExit(f"the stream ran no batch within 300 s: {query.exception()}")
    cfg = GeneratorConfig(count=int(rate * seconds), seed=11, start=datetime.now(UTC), rate=rate)
    ledger = Path(f"/tmp/tributary-bench/sustained-{uuid.uuid4().hex[:6]}.jsonl")
    # A process of its own, as a real producer is: a thread here would share the driver's
    # interpreter lock with the stream's Python side (foreachBatch, its Arrow and delta-rs work).
    producer = multiprocessing.get_context("spawn").Process(
        target=produce,
        args=(settings, cfg, ledger),
        kwargs={"realtime": True, "progress_every": 30.0},
    )
    began = datetime.now(UTC)
    producer.start()
    producer.join()
    if producer.exitcode != 0:
        raise SystemExit(f"the producer exited {producer.exitcode}")
    ended = last_sent(ledger)
    time.sleep(30)  # let the stream drain what the last seconds produced
    query.stop()
    progress = spark.read.format("delta").load(OUT.progress.path(settings)).toPandas()
    progress = progress.sort_values("batch_id")
    active = progress[progress["input_rows"] > 0]
    warming = active["processed_at"] < (began + timedelta(seconds=warm_up)).replace(tzinfo=None)
    # A batch that started after the producer's last record holds its last records, which have
    # aged for as long as the batch before it ran: idle time, not the stream's latency.
    batch_began = active["processed_at"] - pd.to_timedelta(active["duration_seconds"], unit="s")
    draining = batch_began > ended.replace(tzinfo=None)
    steady = active[~warming & ~draining]
    lags = steady["total_lag"].dropna().tolist()
    return {
        "rate": rate,
        "seconds": seconds,
        "warm_up_seconds": warm_up,
        "warm_up_batches": int(warming.sum()),
        "warm_up_freshness_max_seconds": round(
            float(active[warming]["freshness_seconds"].max()), 1
        ),
        "batches": len(steady),
        "drain_batches_left_out": int(draining.sum()),
        "freshness_p50_seconds": round(float(steady["freshness_seconds"].quantile(0.5)), 1),
        "freshness_p99_seconds": round(float(steady["freshness_seconds"].quantile(0.99)), 1),
        "freshness_max_seconds": round(float(steady["freshness_seconds"].max()), 1),
        "median_batch_seconds": round(float(steady["duration_seconds"].median()), 2),
        "lag_first_half_mean": round(sum(lags[: len(lags) // 2]) / max(1, len(lags) // 2)),
        "lag_second_half_mean": round(
            sum(lags[len(lags) // 2 :]) / max(1, len(lags) - len(lags) // 2)
        ),
    }


def last_sent(ledger: Path) -> datetime:
    """When the producer's last record was acknowledged (its ledger's last line): the producer
    process ends later, once it has closed its connections."""
    with ledger.open() as lines:
        for line in lines:
            last = line
    return datetime.fromtimestamp(json.loads(last)["timestamp_ms"] / 1000, UTC)


FRESHNESS_GOAL_SECONDS = 5.0
LAG_GROWTH_TOLERANCE = 1.1


def meets_freshness_goal(got: dict[str, Any]) -> bool:
    """Issue 3's goal for a sustained run: p99 freshness under 5 s, the lag not growing."""
    # Growing: the second half's mean lag is over the first half's by more than 10% plus one
    # second of input (at low rates a few records either way are noise).
    growing = (
        got["lag_second_half_mean"]
        > LAG_GROWTH_TOLERANCE * got["lag_first_half_mean"] + got["rate"]
    )
    return bool(got["freshness_p99_seconds"] < FRESHNESS_GOAL_SECONDS and not growing)


def main() -> None:
    parser = argparse.ArgumentParser(
        allow_abbrev=False,
        prog="python -m bench.speed_layer",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument(
        "--storage", nargs="+", default=["local", "minio"], choices=["local", "minio"]
    )
    parser.add_argument("--max-offsets-per-trigger", type=int, default=200_000)
    parser.add_argument("--sustain-rate", type=float, nargs="+", default=[500.0])
    parser.add_argument("--sustain-seconds", type=float, default=300.0)
    parser.add_argument(
        "--sustain-storage", nargs="*", default=["local", "minio"], choices=["local", "minio"]
    )
    parser.add_argument("--warm-up-seconds", type=float, default=30.0)
    args = parser.parse_args()
    for option, values in (
        ("--storage", args.storage),
        ("--sustain-storage", args.sustain_storage),
        ("--sustain-rate", args.sustain_rate),
    ):
        # Each value names its run's lakehouse: a second run would find the first's tables
        # caught up and report a rate of millions of events/s.
        if len(set(values)) != len(values):
            parser.error(f"{option} gives a value twice: {' '.join(map(str, values))}")

    run = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    topic = f"bench-{run.lower()}"
    base = bench_settings("local", topic, run, max_offsets_per_trigger=args.max_offsets_per_trigger)
    spark = get_spark("bench", bench_settings("minio", topic, run))
    results: dict[str, Any] = {"run": run, "events": args.events, "machine": "2 cores, 24 GiB"}

    print(f"==> loading {args.events} events into {topic} with Spark's Kafka writer", flush=True)
    results["load_events_per_second"] = round(load_topic(spark, base, args.events))
    print("==> baseline: Kafka -> count, no sinks", flush=True)
    results["raw_read_events_per_second"] = round(raw_read_rate(spark, base, run))
    print("==> floor: Kafka -> parse, validate, dedup per batch, no view, no write", flush=True)
    results["floor_events_per_second"] = round(floor_rate(spark, base, run))
    results["floor_ratio_to_raw_read"] = round(
        results["floor_events_per_second"] / results["raw_read_events_per_second"], 3
    )
    print("==> floor: the same, then append raw records and new events to Delta", flush=True)
    results["appends_floor_events_per_second"] = round(appends_floor_rate(spark, base, run))
    results["appends_floor_ratio_to_raw_read"] = round(
        results["appends_floor_events_per_second"] / results["raw_read_events_per_second"], 3
    )
    print("==> floor: the same, then append three per-batch views and a progress row", flush=True)
    results["tables_floor_events_per_second"] = round(tables_floor_rate(spark, base, run))
    results["tables_floor_ratio_to_raw_read"] = round(
        results["tables_floor_events_per_second"] / results["raw_read_events_per_second"], 3
    )
    print("==> floor: the same, the views and the progress row committed by delta-rs", flush=True)
    results["tables_floor_delta_rs_events_per_second"] = round(
        tables_floor_rate(spark, base, run, few_rows_by_delta_rs=True)
    )
    for storage in args.storage:
        print(f"==> speed layer catch-up on {storage}", flush=True)
        settings = bench_settings(
            storage, topic, f"{run}-{storage}", max_offsets_per_trigger=args.max_offsets_per_trigger
        )
        got = speed_catch_up(spark, settings)
        got["ratio_to_raw_read"] = round(
            got["events_per_second"] / results["raw_read_events_per_second"], 3
        )
        results[f"catch_up_{storage}"] = got
        print(f"    {got}", flush=True)
    for storage in args.sustain_storage if args.sustain_seconds > 0 else []:
        met = []
        for rate in args.sustain_rate:
            print(f"==> sustained {rate}/s for {args.sustain_seconds}s ({storage})", flush=True)
            name = f"live-{storage}" + (f"-{rate:g}" if len(args.sustain_rate) > 1 else "")
            settings = bench_settings(
                storage, f"{topic}-{name}", f"{run}-{name}", trigger_interval_seconds=1
            )
            got = sustained(spark, settings, rate, args.sustain_seconds, args.warm_up_seconds)
            got["meets_goal"] = meets_freshness_goal(got)
            met += [rate] if got["meets_goal"] else []
            key = f"sustained_{storage}" + (f"_{rate:g}" if len(args.sustain_rate) > 1 else "")
            results[key] = got
            print(f"    {got}", flush=True)
        results[f"highest_rate_meeting_goal_{storage}"] = max(met, default=None)
    save_results("speed_layer", run, results)


if __name__ == "__main__":
    main()
