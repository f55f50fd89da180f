"""What the as-of enrichment costs next to the speed layer it follows.

    .venv/bin/python -m bench.enrichment [--batches 20] [--events-per-batch 2500]
                        [--minutes-per-batch 0.1] [--change-every 5] [--late-by BATCHES]

The same synthetic micro-batches as bench.speed_write_threads (bench.speed_aging's Kafka
records) go through a speed-layer processor (the baseline: bronze, silver, views, progress),
and each batch's new silver rows then through the enrichment processor
(lakehouse.joins.enrichment), joined with users' and products' history tables written by the
bench: every user the batches name has a version from before the run, and every
--change-every batches a tenth of them gets a new version starting in the past, so the next
enrichment batch corrects the events it bears on: by default at the run's start (the first
tenth, then the first fifth, ...: each correction reaches back over the whole run), with
--late-by N a new tenth each time, from N batches back (a changelog N batches behind). The
figure is the median of (speed layer + enrichment) over the median of the speed layer alone,
per batch, after a warm-up of 5 batches (issue 32's goal: at most 1.3), with the enrichment's
own median and its corrected events; the same ratio of means weighs in the batches that
correct earlier events. The synthetic events carry no product: the product join runs but
matches nothing.
Results go to bench/results/enrichment-<timestamp>.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.report import save_results
from bench.speed_aging import ACTIVE_USERS, OUT, USERS_JOINING_PER_MINUTE, kafka_batch
from bench.speed_layer import bench_settings
from lakehouse.cdc.changelog import history_table
from lakehouse.cdc.shop import PRODUCTS, USERS
from lakehouse.core.config import Settings
from lakehouse.core.delta_io import read_table
from lakehouse.core.frames import rows_frame
from lakehouse.joins.enrichment import EVENT_COLUMNS, PROGRESS, EnrichmentProcessor
from lakehouse.speed.micro_batch import MicroBatchProcessor

WARM_UP_BATCHES = 5


def checkpoint_of(folder: Path, query_id: str) -> str:
    folder.mkdir(parents=True)
    (folder / "metadata").write_text(json.dumps({"id": query_id}) + "\n")
    return str(folder)


def write_users(
    spark: Any, settings: Settings, users: int, start: datetime, moves: dict[int, datetime]
) -> None:
    """Every user with a version from `start` - 1 day; those in `moves` with a second version
    from the instant given (their first one ended there), as the changelog writes them."""
    then = start - timedelta(days=1)
    rows = []
    for n in range(users):
        moved = moves.get(n)
        rows.append((f"u{n}", "new", "DE", then, then, moved, moved is None, False, n, None))
        if moved is not None:
            rows.append((f"u{n}", "gold", "DE", moved, moved, None, True, False, users + n, None))
    target = history_table(USERS)
    frame = rows_frame(spark, rows, target.spark_schema())
    frame.write.format("delta").mode("overwrite").save(target.path(settings))


def moved_users(
    users: int, index: int, change_every: int, start: datetime, minutes: float, late_by: int | None
) -> dict[int, datetime]:
    """Who has moved by batch `index`, and when: each change a tenth more of the users. With
    `late_by` None, all of them at the run's start (the first tenth, then the first fifth, ...);
    else each tenth at the start of the batch `late_by` batches before the one that sees it
    (a changelog that many batches behind the click stream)."""
    changes = index // change_every
    if late_by is None:
        return dict.fromkeys(range(users * changes // 10), start)
    moves: dict[int, datetime] = {}
    for change in range(1, changes + 1):
        when = start + timedelta(minutes=max(0, change * change_every - late_by) * minutes)
        for n in range(users * (change - 1) // 10, users * change // 10):
            moves[n] = when
    return moves


def run(
    batches: int,
    events: int,
    minutes: float,
    change_every: int,
    late_by: int | None,
    stamp: str,
) -> dict[str, Any]:
    from lakehouse.core.spark import get_spark

    name = f"enrichment-{stamp}-{events}"
    settings = bench_settings("local", "bench-enrichment", name)
    spark = get_spark("bench-enrichment", settings)
    folder = Path(f"/tmp/tributary-bench/{name}")
    speed = MicroBatchProcessor(settings, OUT, checkpoint_of(folder / "speed", f"{name}-s"))
    enrich = EnrichmentProcessor(settings, checkpoint_of(folder / "enrich", f"{name}-e"))
    users = ACTIVE_USERS + int(batches * minutes * USERS_JOINING_PER_MINUTE) + 1
    start = datetime.now(UTC) - timedelta(minutes=batches * minutes + 5)
    write_users(spark, settings, users, start, {})
    empty = rows_frame(spark, [], history_table(PRODUCTS).spark_schema())
    empty.write.format("delta").save(history_table(PRODUCTS).path(settings))
    speed_seconds: list[float] = []
    enrich_seconds: list[float] = []
    for index in range(batches):
        if index and index % change_every == 0:
            moves = moved_users(users, index, change_every, start, minutes, late_by)
            write_users(spark, settings, users, start, moves)
        batch = kafka_batch(spark, index, events, start, minutes).localCheckpoint()
        began = time.monotonic()
        speed(batch, index)
        speed_seconds.append(time.monotonic() - began)
        first, last = index * events, (index + 1) * events
        silver = read_table(spark, OUT.silver, settings)
        new = silver.where(f"kafka_offset >= {first} AND kafka_offset < {last}")
        new = new.select(*EVENT_COLUMNS, "event_date").localCheckpoint()
        began = time.monotonic()
        enrich(new, index)
        enrich_seconds.append(time.monotonic() - began)
        print(
            f"batch {index + 1}/{batches}: speed {speed_seconds[-1]:.2f} s, "
            f"enrichment {enrich_seconds[-1]:.2f} s",
            flush=True,
        )
    speed_median = statistics.median(speed_seconds[WARM_UP_BATCHES:])
    both = [s + e for s, e in zip(speed_seconds, enrich_seconds, strict=True)]
    progress = read_table(spark, PROGRESS, settings).collect()
    return {
        "speed_median_batch_seconds": round(speed_median, 2),
        "enrichment_median_batch_seconds": round(
            statistics.median(enrich_seconds[WARM_UP_BATCHES:]), 2
        ),
        "ratio_with_enrichment": round(statistics.median(both[WARM_UP_BATCHES:]) / speed_median, 2),
        # With the batches that correct earlier events weighed in (every --change-every).
        "enrichment_mean_batch_seconds": round(
            statistics.mean(enrich_seconds[WARM_UP_BATCHES:]), 2
        ),
        "ratio_of_means_with_enrichment": round(
            statistics.mean(both[WARM_UP_BATCHES:])
            / statistics.mean(speed_seconds[WARM_UP_BATCHES:]),
            2,
        ),
        "events_enriched": sum(int(r["events"]) for r in progress),
        "events_corrected": sum(int(r["corrected"]) for r in progress),
        "users_in_history": users,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        allow_abbrev=False,
        prog="python -m bench.enrichment",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--events-per-batch", type=int, default=2500)
    parser.add_argument("--minutes-per-batch", type=float, default=0.1)
    parser.add_argument("--change-every", type=int, default=5)
    parser.add_argument(
        "--late-by",
        type=int,
        metavar="BATCHES",
        help="each change starts this many batches before the batch that sees it "
        "(default: every change starts at the run's start)",
    )
    args = parser.parse_args()
    if args.batches <= WARM_UP_BATCHES + 1:
        parser.error(f"--batches must be more than {WARM_UP_BATCHES + 1}")
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    result = {
        "run": stamp,
        "machine": "2 cores, 24 GiB",
        "batches": args.batches,
        "events_per_batch": args.events_per_batch,
        "warm_up_batches": WARM_UP_BATCHES,
        "change_every": args.change_every,
        "late_by_batches": args.late_by,
        **run(
            args.batches,
            args.events_per_batch,
            args.minutes_per_batch,
            args.change_every,
            args.late_by,
            stamp,
        ),
    }
    save_results("enrichment", stamp, result)


if __name__ == "__main__":
    main()
