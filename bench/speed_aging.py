"""Does a speed-layer micro-batch get slower as the stream's tables age?

    .venv/bin/python -m bench.speed_aging [--batches 300] [--events-per-batch 2000]
                                          [--minutes-per-batch 1] [--storage local]

A stream that runs for days commits every few seconds: each commit adds files to its tables,
and the views' folds rewrite their hours. A 5-minute benchmark cannot see what that does after
a day, so this one compresses event time: every micro-batch carries --minutes-per-batch
minutes of events (users come and go, so sessions close and windows pile up) and is handed to
the speed layer's own foreachBatch code (lakehouse.speed.micro_batch.MicroBatchProcessor) straight
after the previous one, with no Kafka in between: only the tables' growth differs from batch
to batch. 300 batches of 1 minute leave tables with 300 commits and 5 hours of windows.

The figure is a ratio within the run: median batch time over the last 30 batches against the
first 30 after a warm-up (1.0 = no slower as the tables grow), with the per-step medians.
Results go to bench/results/speed_aging-<timestamp>.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from bench.report import save_results
from bench.speed_layer import bench_settings
from bench.synthetic import event_json, event_type, page
from lakehouse.speed.micro_batch import MicroBatchProcessor
from lakehouse.speed.outputs import SpeedOutputs
from lakehouse.transforms.views import VIEWS

OUT = SpeedOutputs.live()
WARM_UP_BATCHES = 10
WINDOW = 30  # batches compared at each end
# Users active at once; the population drifts so that users leave and their sessions close.
ACTIVE_USERS = 3000
USERS_JOINING_PER_MINUTE = 50


def kafka_batch(spark: Any, index: int, events: int, start: datetime, minutes: float) -> Any:
    """`events` Kafka-shaped records whose event times fill minute `index` of the run."""
    from pyspark.sql import functions as F

    first_micros = int((start + timedelta(minutes=index * minutes)).timestamp() * 1e6)
    step_micros = int(minutes * 60e6 / events)
    first_user = int(index * minutes * USERS_JOINING_PER_MINUTE)
    return (
        spark.range(events, numPartitions=2)
        .select(
            "id",
            F.concat(
                F.lit("u"), (F.lit(first_user) + F.col("id") * 7919 % ACTIVE_USERS).cast("string")
            ).alias("user_id"),
            F.expr("uuid()").alias("event_id"),
            event_type(F.col("id")).alias("event_type"),
            page(F.col("id")).alias("page"),
            F.timestamp_micros(F.lit(first_micros) + F.col("id") * step_micros).alias("t"),
        )
        .select(
            F.col("user_id").cast("binary").alias("key"),
            event_json().cast("binary").alias("value"),
            F.lit("events").alias("topic"),
            (F.col("id") % 3).cast("int").alias("partition"),
            (F.lit(index * events) + F.col("id")).alias("offset"),
            F.col("t").alias("timestamp"),
            F.lit(0).alias("timestampType"),
        )
    )


def run(batches: int, events: int, minutes: float, storage: str) -> dict[str, Any]:
    from lakehouse.core.spark import get_spark

    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    settings = bench_settings(storage, "bench-aging", f"aging-{stamp}")
    spark = get_spark("bench-speed-aging", settings)
    checkpoint = Path(f"/tmp/tributary-bench/aging-{stamp}/checkpoint")
    checkpoint.mkdir(parents=True)
    # The processor takes its writer id from the streaming checkpoint's query id.
    (checkpoint / "metadata").write_text('{"id":"aging"}\n')
    # Nothing waits in Kafka after a batch: every batch runs as the live stream's small ones do.
    processor = MicroBatchProcessor(settings, OUT, str(checkpoint), lambda: {})
    start = datetime.now(UTC) - timedelta(minutes=batches * minutes + 5)
    seconds: list[float] = []
    for index in range(batches):
        batch = kafka_batch(spark, index, events, start, minutes).localCheckpoint()
        began = time.monotonic()
        processor(batch, index)
        seconds.append(time.monotonic() - began)
        if index % 25 == 0 or index == batches - 1:
            print(f"batch {index + 1}/{batches}: {seconds[-1]:.2f} s", flush=True)
    progress: Any = spark.read.format("delta").load(OUT.progress.path(settings)).toPandas()
    steps = progress.sort_values("batch_id")["step_seconds"].tolist()
    early = slice(WARM_UP_BATCHES, WARM_UP_BATCHES + WINDOW)
    late = slice(batches - WINDOW, batches)

    def step_medians(part: slice) -> dict[str, float]:
        names = sorted({name for s in steps[part] for name in s})
        return {n: round(statistics.median(s.get(n, 0.0) for s in steps[part]), 3) for n in names}

    # Compaction and vacuum run in turns, in few batches: their cost where they ran.
    turns: dict[str, list[float]] = {}
    for s in steps:
        for name, took in s.items():
            if name.startswith(("compact_", "vacuum_")):
                turns.setdefault(name.split("_", 1)[0], []).append(took)
    # Files on disk that no commit ever added (only a vacuum that lists the folder deletes them).
    stray = {
        name: len(stray_files(getattr(OUT, name).path(settings)))
        for name in ("raw", "silver", "progress", "quarantine", "late")
        if storage == "local"
    }
    first, last = statistics.median(seconds[early]), statistics.median(seconds[late])
    # Files a reader of each table goes through at the end (appends add some every batch).
    files = {
        name: len(spark.read.format("delta").load(t.path(settings)).inputFiles())
        for name, t in (
            ("bronze", OUT.raw),
            ("silver", OUT.silver),
            ("progress", OUT.progress),
            *((view, OUT.view_table(view)) for view in VIEWS),
        )
        if t is not None
    }
    # A view's stored rows: its batches' partial rows, folded once their hours hold several
    # files (lakehouse.transforms.partials); left unfolded they would grow with every batch.
    view_rows = {
        view: spark.read.format("delta").load(OUT.view_table(view).path(settings)).count()
        for view in VIEWS
    }
    return {
        "run": stamp,
        "storage": storage,
        "batches": batches,
        "events_per_batch": events,
        "minutes_per_batch": minutes,
        "compact_every_batches": settings.speed.compact_every_batches,
        "vacuum_every_batches": settings.speed.vacuum_every_batches,
        "first_median_batch_seconds": round(first, 3),
        "last_median_batch_seconds": round(last, 3),
        "last_over_first": round(last / first, 2),
        "max_batch_seconds": round(max(seconds[WARM_UP_BATCHES:]), 2),
        "first_step_medians": step_medians(early),
        "last_step_medians": step_medians(late),
        "files_at_end": files,
        "turn_seconds": {
            kind: {
                "count": len(took),
                "median": round(statistics.median(took), 2),
                "max": round(max(took), 2),
            }
            for kind, took in turns.items()
        },
        "stray_files_at_end": stray,
        "view_rows_stored_at_end": view_rows,
    }


def stray_files(table_path: str) -> set[str]:
    """Data files in a local table's folder that no commit in its log ever added."""
    root = Path(table_path)
    added = {
        unquote(action["add"]["path"])
        for commit in (root / "_delta_log").glob("*.json")
        for action in map(json.loads, commit.read_text().splitlines())
        if "add" in action
    }
    on_disk = {str(f.relative_to(root)) for f in root.rglob("*.parquet")}
    return {f for f in on_disk if "_delta_log" not in f} - added


def main() -> None:
    parser = argparse.ArgumentParser(
        allow_abbrev=False,
        prog="python -m bench.speed_aging",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--batches", type=int, default=300)
    parser.add_argument("--events-per-batch", type=int, default=2000)
    parser.add_argument("--minutes-per-batch", type=float, default=1.0)
    parser.add_argument("--storage", default="local", choices=["local", "minio"])
    args = parser.parse_args()
    if args.batches < WARM_UP_BATCHES + 2 * WINDOW:
        parser.error(f"--batches must be at least {WARM_UP_BATCHES + 2 * WINDOW}")
    result = run(args.batches, args.events_per_batch, args.minutes_per_batch, args.storage)
    save_results("speed_aging", result["run"], result)


if __name__ == "__main__":
    main()
