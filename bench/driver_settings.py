"""How much sooner does a micro-batch finish with the driver's class path ordered (its busiest
jars first: lakehouse.core.spark.driver_class_path) and PySpark's DataFrame debugging off?

    .venv/bin/python -m bench.driver_settings [--rounds 3] [--batches 15] [--events-per-batch 300]

Both are settings of the driver's JVM or of PySpark's first session, so each variant runs in a
driver process of its own: the same synthetic micro-batches (bench.speed_aging's records)
through a speed-layer processor writing its own tables, the variants one after another in
each round and in a new order every round, so that a busy moment of this noisy machine falls
on each alike. No variant maps the class archive `make setup` makes (it serves only the class
path it was made with). The figure is each variant's median batch time, after a warm-up of 5
batches, over the baseline's (pyspark's class path order, debugging on) in the same round.
Results go to bench/results/driver_settings-<timestamp>.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.report import save_results

WARM_UP_BATCHES = 5
DEBUGGING = "spark.python.sql.dataFrameDebugging.enabled"
# Each variant's Spark settings over the factory's; "" is Spark's own empty class path prefix.
VARIANTS: dict[str, dict[str, str]] = {
    "baseline": {"spark.driver.extraClassPath": "", DEBUGGING: "true"},
    "class_path": {DEBUGGING: "true"},
    "no_debugging": {"spark.driver.extraClassPath": ""},
    "both": {},
}


def run_variant(name: str, batches: int, events: int, run: str) -> list[float]:
    """Batch times of one variant, in a driver process of its own (this module's --variant)."""
    command = [sys.executable, "-m", "bench.driver_settings", "--variant", name]
    command += ["--batches", str(batches), "--events-per-batch", str(events), "--run", run]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise SystemExit(f"variant {name} failed:\n{done.stderr[-3000:]}")
    seconds: list[float] = json.loads(lines[-1])["seconds"]
    return seconds


def batch_times(name: str, batches: int, events: int, run: str) -> list[float]:
    """In this process: start the variant's driver and time its micro-batches."""
    from bench.speed_aging import OUT, kafka_batch
    from bench.speed_layer import bench_settings
    from lakehouse.core.spark import get_spark
    from lakehouse.speed.micro_batch import MicroBatchProcessor

    run_name = f"driver-settings-{run}-{name}-{time.monotonic_ns()}"
    settings = bench_settings("local", "bench-driver-settings", run_name)
    spark = get_spark("bench-driver-settings", settings, VARIANTS[name], java_options="")
    checkpoint = Path(f"/tmp/tributary-bench/{run_name}/checkpoint")
    checkpoint.mkdir(parents=True)
    (checkpoint / "metadata").write_text(json.dumps({"id": run_name}) + "\n")
    processor = MicroBatchProcessor(settings, OUT, str(checkpoint), dict)
    start = datetime.now(UTC) - timedelta(minutes=batches * 0.1 + 5)
    seconds = []
    for index in range(batches):
        batch = kafka_batch(spark, index, events, start, 0.1).localCheckpoint()
        began = time.monotonic()
        processor(batch, index)
        seconds.append(round(time.monotonic() - began, 3))
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(
        allow_abbrev=False,
        prog="python -m bench.driver_settings",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batches", type=int, default=15)
    parser.add_argument("--events-per-batch", type=int, default=300)
    parser.add_argument("--variant", choices=sorted(VARIANTS), help=argparse.SUPPRESS)
    parser.add_argument("--run", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.batches <= WARM_UP_BATCHES + 1:
        parser.error(f"--batches must be more than {WARM_UP_BATCHES + 1}")
    if args.variant:
        seconds = batch_times(args.variant, args.batches, args.events_per_batch, args.run)
        print(json.dumps({"seconds": seconds}), flush=True)
        return
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    names = list(VARIANTS)
    rounds: list[dict[str, Any]] = []
    for index in range(args.rounds):
        order = names[index % len(names) :] + names[: index % len(names)]
        medians = {}
        for name in order:
            seconds = run_variant(name, args.batches, args.events_per_batch, stamp)
            medians[name] = statistics.median(seconds[WARM_UP_BATCHES:])
            took = f"median {medians[name]:.2f} s"
            print(f"round {index + 1}/{args.rounds} {name}: {took}", flush=True)
        base = medians["baseline"]
        rounds.append(
            {
                n: {"median_batch_seconds": round(m, 3), "ratio": round(m / base, 3)}
                for n, m in medians.items()
            }
        )
    summary = {
        name: round(statistics.median(r[name]["ratio"] for r in rounds), 3) for name in names
    }
    result = {
        "run": stamp,
        "machine": "2 cores, 24 GiB",
        "batches": args.batches,
        "warm_up_batches": WARM_UP_BATCHES,
        "events_per_batch": args.events_per_batch,
        "median_ratio_to_baseline": summary,
        "rounds": rounds,
    }
    save_results("driver_settings", stamp, result)


if __name__ == "__main__":
    main()
