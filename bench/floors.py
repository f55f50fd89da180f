"""Lower bounds that no pipeline reading JSON events can beat on this machine.

    .venv/bin/python -m bench.floors [--events 10000000] [--rounds 2]

The goals compare a recompute or a replay with a plain read that never looks inside a record.
Parsing the JSON is work every recompute and replay must do, and so are validating and
deduplicating (invariant 1: every record lands once, or in quarantine, or is counted as a
duplicate). Each floor below does a prefix of that work and discards the result (Spark's no-op
sink): no view, no write. Timed against the plain read in the same process, they show how much
of a gap to a goal no change to our views or writes could close.

Run as a script it loads --events JSON events into a fresh topic (Spark's Kafka writer) and
copies them into a fresh bronze table (untimed), then --rounds times: the two baselines (a
batch read of the topic counting records, a scan of bronze counting values) and every floor
over each. Later rounds run in a warmer JVM, the baselines too. Results are printed and
written to bench/results/floors-<timestamp>.json.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from lakehouse.core.config import Settings
from lakehouse.transforms.dedup import DEDUP_COLUMNS, first_delivery_per_event
from lakehouse.transforms.parse import parse_events
from lakehouse.transforms.validate import ValidationRules, accepted_events, validate_events
from lakehouse.transforms.views import VIEW_INPUT_COLUMNS


def _discard(df: Any) -> float:
    """Seconds to compute every column of every row of `df`, writing nothing."""
    began = time.monotonic()
    df.write.format("noop").mode("overwrite").save()
    return time.monotonic() - began


def _accepted(raw: Any, settings: Settings) -> Any:
    rules = ValidationRules.of(settings)
    return raw.transform(parse_events).transform(validate_events, rules).transform(accepted_events)


def parse_only_seconds(raw: Any) -> float:
    """Read `raw` (bronze-shaped rows) and parse every record's fields, no more."""
    return _discard(raw.transform(parse_events))


def validated_seconds(raw: Any, settings: Settings) -> float:
    """Read, parse and validate every record; keep the accepted ones."""
    return _discard(_accepted(raw, settings))


def distinct_ids_seconds(raw: Any, settings: Settings) -> float:
    """Read, parse, validate, then only find the distinct event ids: what any deduplication
    must do at least, whichever delivery it keeps."""
    return _discard(_accepted(raw, settings).select("event_id").distinct())


def deduplicated_events(raw: Any, settings: Settings) -> Any:
    """`raw` parsed, validated and deduplicated (first delivery wins), every event column."""
    return _accepted(raw, settings).transform(first_delivery_per_event)


def deduplicated_seconds(raw: Any, settings: Settings) -> float:
    """Read, parse, validate and deduplicate, keeping only the columns the views read, as the
    batch layer does: the shared first steps of the batch layer and a replay, without their
    cache, views and writes."""
    events = _accepted(raw, settings).select(*DEDUP_COLUMNS, *VIEW_INPUT_COLUMNS)
    return _discard(events.transform(first_delivery_per_event))


FLOORS: dict[str, Callable[[Any, Settings], float]] = {
    "parse": lambda raw, _: parse_only_seconds(raw),
    "parse_validate": validated_seconds,
    "parse_validate_distinct_ids": distinct_ids_seconds,
    "parse_validate_dedup": deduplicated_seconds,
}


def main() -> None:
    from bench.batch_layer import scan_and_count
    from bench.replay import kafka_batch, raw_batch_read
    from bench.report import save_results
    from bench.speed_layer import bench_settings, load_topic
    from lakehouse.core.spark import get_spark
    from lakehouse.core.tables import table
    from lakehouse.transforms.bronze import to_raw_records

    parser = argparse.ArgumentParser(
        allow_abbrev=False,
        prog="python -m bench.floors",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--events", type=int, default=10_000_000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()

    run = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    settings = bench_settings("local", f"bench-floors-{run.lower()}", f"floors-{run}")
    spark = get_spark("bench-floors", settings)
    bronze_path = table("bronze.events_raw").path(settings)
    print(f"==> loading {args.events} events into the topic, then bronze", flush=True)
    load_topic(spark, settings, args.events)
    topic = settings.kafka.topic
    kafka_batch(spark, settings, topic).transform(to_raw_records).write.format("delta").save(
        bronze_path
    )
    sources = {
        "kafka": (
            lambda: raw_batch_read(spark, settings, topic),
            lambda: kafka_batch(spark, settings, topic).transform(to_raw_records),
        ),
        "bronze": (
            lambda: scan_and_count(spark, settings),
            lambda: spark.read.format("delta").load(bronze_path),
        ),
    }
    results: dict[str, Any] = {"run": run, "events": args.events, "machine": "2 cores, 24 GiB"}
    results["rounds"] = []
    for round_ in range(1, args.rounds + 1):
        got: dict[str, Any] = {}
        for source, (baseline, raw) in sources.items():
            seconds, count = baseline()
            assert count == args.events, (source, count, args.events)
            got[f"{source}_baseline_seconds"] = round(seconds, 2)
            for name, floor in FLOORS.items():
                print(f"==> round {round_}: {source}, {name}", flush=True)
                took = floor(raw(), settings)
                got[f"{source}_{name}_seconds"] = round(took, 2)
                # The goals' own terms: the batch layer's time as a multiple of the scan, the
                # replay's rate as a fraction of the raw read's.
                got[f"{source}_{name}_" + ("x_scan" if source == "bronze" else "of_raw_read")] = (
                    round(took / seconds, 2) if source == "bronze" else round(seconds / took, 3)
                )
        results["rounds"].append(got)
        print(f"    {got}", flush=True)
    save_results("floors", run, results)


if __name__ == "__main__":
    main()
