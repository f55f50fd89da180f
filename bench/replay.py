"""Replay rate from earliest, against Spark's raw batch read of the same topic, and against
the batch layer recomputing the same events.

    .venv/bin/python -m bench.replay [--events 10000000] [--max-offsets-per-trigger 5000000]
                                     [--rounds 2]

Steps, in one process and one SparkSession so the ratios compare like with like:
1. load: write --events JSON events (one day of event time) into a fresh topic with Spark's
   Kafka writer (bench.speed_layer.load_topic);
2. baseline: Spark's batch Kafka source reads the whole topic and counts it;
   floors: the same read, parsing every record's JSON and nothing else; then parsing,
   validating and deduplicating, no view and no write (bench.floors);
3. --rounds times (default 2): a replay (lakehouse.replay.run.run_replay from earliest into a new
   version, local disk), then the batch layer recomputing the same events from bronze (the
   topic written to bronze.events_raw once, untimed, as the live stream would have).
Results are printed and written to bench/results/replay-<timestamp>.json.
"""

from __future__ import annotations

import argparse
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from bench.floors import deduplicated_seconds, parse_only_seconds
from bench.report import save_results
from bench.speed_layer import bench_settings, load_topic
from lakehouse.batch.recompute import Interval, recompute_interval
from lakehouse.core.config import Settings
from lakehouse.core.delta_io import table_exists
from lakehouse.core.kafka_io import ensure_topic
from lakehouse.core.spark import get_spark
from lakehouse.core.tables import table
from lakehouse.replay.plan import ReplayStart, plan_replay
from lakehouse.replay.run import run_replay
from lakehouse.transforms.bronze import to_raw_records


def kafka_batch(spark: Any, settings: Settings, topic: str) -> Any:
    """The whole topic, as Spark's batch Kafka source reads it (as many tasks as a replay)."""
    return (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", settings.kafka.bootstrap_servers)
        .option("minPartitions", settings.kafka.min_read_tasks)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .load()
    )


def raw_batch_read(spark: Any, settings: Settings, topic: str) -> tuple[float, int]:
    began = time.monotonic()
    count = kafka_batch(spark, settings, topic).count()
    return time.monotonic() - began, count


def timed_replay(
    spark: Any, settings: Settings, topic: str, version: str, max_offsets_per_trigger: int | None
) -> tuple[float, int]:
    """Replay the whole topic from earliest into `version`: its seconds and records."""
    plan = plan_replay(settings, topic, ReplayStart("earliest"))
    began = time.monotonic()
    outcome = run_replay(
        spark, settings, plan, version, max_offsets_per_trigger=max_offsets_per_trigger
    )
    seconds = time.monotonic() - began
    assert outcome.status == "caught_up", f"the replay ended {outcome.status}: {outcome.failure}"
    return seconds, plan.records


def replay_and_batch(
    spark: Any,
    settings: Settings,
    topic: str,
    args: argparse.Namespace,
    raw_read_rate: float,
    version: str,
) -> dict[str, Any]:
    """One timed replay from earliest into `version`, then one timed batch recompute."""
    replay_seconds, _ = timed_replay(spark, settings, topic, version, args.max_offsets_per_trigger)
    print("==> batch layer over the same events", flush=True)
    bronze = table("bronze.events_raw")
    if not table_exists(spark, bronze, settings):
        # As the live speed layer would have written it (not timed: the batch layer's input,
        # not its work).
        kafka_batch(spark, settings, topic).transform(to_raw_records).write.format("delta").save(
            bronze.path(settings)
        )
    # load_topic spreads event times over the hour before it ran: all are in this interval.
    minute = datetime.now(UTC).replace(second=0, microsecond=0)
    batch = recompute_interval(
        spark, settings, Interval(minute - timedelta(hours=2), minute), "bench"
    )
    return {
        "replay_seconds": round(replay_seconds, 1),
        "replay_events_per_second": round(args.events / replay_seconds),
        "replay_ratio_to_raw_read": round(args.events / replay_seconds / raw_read_rate, 3),
        "batch_seconds": round(batch.seconds, 1),
        "batch_events": batch.events,
        "replay_to_batch_time": round(replay_seconds / batch.seconds, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        allow_abbrev=False,
        prog="python -m bench.replay",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--events", type=int, default=10_000_000)
    parser.add_argument("--max-offsets-per-trigger", type=int, default=5_000_000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")

    run = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    topic = f"bench-replay-{run.lower()}"
    settings = bench_settings("local", topic, f"replay-{run}")
    spark = get_spark("bench-replay", settings)
    results: dict[str, Any] = {
        "run": run,
        "events": args.events,
        "max_offsets_per_trigger": args.max_offsets_per_trigger,
        "machine": "2 cores, 24 GiB",
    }

    print(f"==> loading {args.events} events into {topic}", flush=True)
    ensure_topic(settings)
    results["load_events_per_second"] = round(load_topic(spark, settings, args.events))
    print("==> baseline: Spark batch read of the topic, count only", flush=True)
    seconds, count = raw_batch_read(spark, settings, topic)
    assert count == args.events, (count, args.events)
    results["raw_read_events_per_second"] = round(count / seconds)
    print("==> floor: read the topic and parse every record, nothing else", flush=True)
    parse_seconds = parse_only_seconds(
        kafka_batch(spark, settings, topic).transform(to_raw_records)
    )
    results["parse_only_events_per_second"] = round(count / parse_seconds)
    results["parse_only_ratio_to_raw_read"] = round(seconds / parse_seconds, 3)
    print("==> floor: read, parse, validate and deduplicate, no view, no write", flush=True)
    dedup_seconds = deduplicated_seconds(
        kafka_batch(spark, settings, topic).transform(to_raw_records), settings
    )
    results["deduplicated_events_per_second"] = round(count / dedup_seconds)
    results["deduplicated_ratio_to_raw_read"] = round(seconds / dedup_seconds, 3)

    # Each round replays and recomputes once. The first pays the JVM's warm-up (code
    # generation, JIT) in its replay more than in its batch run, which comes after it; later
    # rounds compare the two in a JVM equally warm for both.
    results["rounds"] = []
    for round_ in range(1, args.rounds + 1):
        print(f"==> round {round_}: replay from earliest", flush=True)
        got = replay_and_batch(spark, settings, topic, args, count / seconds, f"bench{round_}")
        results["rounds"].append(got)
        print(f"    {got}", flush=True)
    results |= results["rounds"][0]  # the first round's figures, as earlier results have them
    save_results("replay", run, results)


if __name__ == "__main__":
    main()
