"""The enrichment processor of another commit against the working tree's, on the same batches.

    .venv/bin/python -m bench.enrichment_ab --against REV [--batches 26]
                        [--events-per-batch 2500] [--change-every 5]

bench.enrichment's micro-batches (through the speed layer first, then each batch's new silver
rows) go through two enrichment processors in one process: `lakehouse/joins/enrichment.py` as
committed at REV (read with `git show`) and the working tree's, taking turns at going first,
each writing a replay version's tables of its own. Reported per side: the median batch that
corrects nothing and the mean batch that corrects (every --change-every batches a tenth more
of the users gets a version from the run's start), after a warm-up of 3 batches; and whether
the two wrote the same enriched rows and the same partial rows of the view. Both sides share
the machine's hour, which a comparison of two bench.enrichment runs does not.
Results go to bench/results/enrichment_ab-<timestamp>.json.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

from bench.enrichment import checkpoint_of, moved_users, write_users
from bench.report import save_results
from bench.speed_aging import ACTIVE_USERS, OUT, USERS_JOINING_PER_MINUTE, kafka_batch
from bench.speed_layer import bench_settings
from lakehouse.cdc.changelog import history_table
from lakehouse.cdc.shop import PRODUCTS
from lakehouse.core.delta_io import read_table
from lakehouse.core.frames import rows_frame
from lakehouse.core.paths import REPO_ROOT
from lakehouse.joins import enrichment
from lakehouse.joins.outputs import EnrichmentOutputs
from lakehouse.speed.micro_batch import MicroBatchProcessor

WARM_UP_BATCHES = 3
MODULE = "lakehouse/joins/enrichment.py"


def module_at(rev: str, folder: Path) -> ModuleType:
    """The enrichment module as committed at `rev`, imported under a name of its own."""
    found = subprocess.run(
        ["git", "show", f"{rev}:{MODULE}"], cwd=REPO_ROOT, capture_output=True, text=True
    )
    if found.returncode != 0:
        sys.exit(f"bench.enrichment_ab: no {MODULE} at {rev!r}: {found.stderr.strip()}")
    path = folder / "enrichment_at_rev.py"
    path.write_text(found.stdout)
    spec = importlib.util.spec_from_file_location("enrichment_at_rev", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def same_rows(spark: Any, left: str, right: str) -> bool:
    a, b = spark.read.format("delta").load(left), spark.read.format("delta").load(right)
    return a.exceptAll(b).isEmpty() and b.exceptAll(a).isEmpty()


def run(rev: str, batches: int, events: int, change_every: int, stamp: str) -> dict[str, Any]:
    from lakehouse.core.spark import get_spark

    with tempfile.TemporaryDirectory() as code:
        old = module_at(rev, Path(code))  # a wrong REV ends the run before Spark starts
    minutes = 0.1
    name = f"enrichment-ab-{stamp}"
    settings = bench_settings("local", "bench-enrichment", name)
    spark = get_spark("bench-enrichment", settings)
    folder = Path(f"/tmp/tributary-bench/{name}")
    speed = MicroBatchProcessor(settings, OUT, checkpoint_of(folder / "speed", f"{name}-s"))
    outputs = {
        "before": EnrichmentOutputs.replay("before"),
        "after": EnrichmentOutputs.replay("after"),
    }
    processors = {
        "before": old.EnrichmentProcessor(
            settings, checkpoint_of(folder / "before", f"{name}-b"), outputs["before"]
        ),
        "after": enrichment.EnrichmentProcessor(
            settings, checkpoint_of(folder / "after", f"{name}-a"), outputs["after"]
        ),
    }
    users = ACTIVE_USERS + int(batches * minutes * USERS_JOINING_PER_MINUTE) + 1
    start = datetime.now(UTC) - timedelta(minutes=batches * minutes + 5)
    write_users(spark, settings, users, start, {})
    empty = rows_frame(spark, [], history_table(PRODUCTS).spark_schema())
    empty.write.format("delta").save(history_table(PRODUCTS).path(settings))
    seconds: dict[str, list[float]] = {side: [] for side in processors}
    for index in range(batches):
        if index and index % change_every == 0:
            moves = moved_users(users, index, change_every, start, minutes, None)
            write_users(spark, settings, users, start, moves)
        speed(kafka_batch(spark, index, events, start, minutes).localCheckpoint(), index)
        silver = read_table(spark, OUT.silver, settings)
        new = silver.where(
            f"kafka_offset >= {index * events} AND kafka_offset < {(index + 1) * events}"
        )
        new = new.select(*enrichment.EVENT_COLUMNS, "event_date").localCheckpoint()
        order = list(processors) if index % 2 == 0 else list(reversed(processors))
        for side in order:
            began = time.monotonic()
            processors[side](new, index)
            seconds[side].append(time.monotonic() - began)
        print(
            f"batch {index + 1}/{batches}: "
            + ", ".join(f"{side} {s[-1]:.2f} s" for side, s in seconds.items()),
            flush=True,
        )
    measured = range(WARM_UP_BATCHES, batches)
    correcting = [i for i in measured if i % change_every == 0]
    steady = [i for i in measured if i % change_every != 0]
    found: dict[str, Any] = {}
    for side, times in seconds.items():
        found[f"{side}_steady_median_seconds"] = round(
            statistics.median(times[i] for i in steady), 3
        )
        if correcting:
            mean = statistics.mean(times[i] for i in correcting)
            found[f"{side}_correcting_mean_seconds"] = round(mean, 3)
    for kind in ("enriched", "revenue"):
        paths = [getattr(o, kind).path(settings) for o in outputs.values()]
        found[f"same_{kind}_rows"] = same_rows(spark, *paths)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(
        allow_abbrev=False,
        prog="python -m bench.enrichment_ab",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--against", required=True, metavar="REV", help="a commit, e.g. HEAD")
    parser.add_argument("--batches", type=int, default=26)
    parser.add_argument("--events-per-batch", type=int, default=2500)
    parser.add_argument("--change-every", type=int, default=5)
    args = parser.parse_args()
    if args.batches <= WARM_UP_BATCHES + args.change_every:
        parser.error(f"--batches must be more than {WARM_UP_BATCHES} + --change-every")
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    result = {
        "run": stamp,
        "machine": "2 cores, 24 GiB",
        "against": args.against,
        "batches": args.batches,
        "events_per_batch": args.events_per_batch,
        "change_every": args.change_every,
        **run(args.against, args.batches, args.events_per_batch, args.change_every, stamp),
    }
    save_results("enrichment_ab", stamp, result)


if __name__ == "__main__":
    main()
