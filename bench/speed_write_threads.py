"""How much sooner does a micro-batch finish with its table writes side by side, with
another number of tasks rebuilding Delta's table state, with another value of any Spark
setting, with its appends made without looking for an earlier try, or with its few-row
commits made by delta-rs?

    .venv/bin/python -m bench.speed_write_threads [--batches 30] [--events-per-batch 300 2500]
                        [--threads 1 4 | --delta-log-tasks 4 1 | --conf KEY VALUE VALUE ...
                         | --untried-appends | --small-commits | --delta-rs-rows 0 50000]
                        [--minutes-per-batch 0.1] [--backlog]

The same micro-batches (bench.speed_aging's synthetic Kafka records, --minutes-per-batch of
event time each) go through one speed-layer processor per variant, each writing its own tables,
in one process and interleaved batch by batch (the order alternating), so that a busy moment of
this noisy machine falls on every variant alike. The variants are the values of
`speed.write_threads` (--threads, the default), of `spark.delta_log_tasks` (--delta-log-tasks)
or of the Spark setting KEY (--conf), or (--untried-appends) every append checked by Delta's
transaction id (delta_io.append_once, as before batch marks) against the stream's own
(delta_io.append_batch: a batch it knows untried appends without looking), or
(--small-commits) the views' partial rows and the progress row appended through Spark against
the stream's own (delta-rs, for a batch it knows untried), or (--delta-rs-rows) the values of
`speed.delta_rs_append_rows` (the largest append delta-rs commits); a setting is set on
the session around each batch, and the MERGEs' own sessions carry it over (as they do
`lakehouse.core.spark.HOW_TO_RUN`). The figure is each variant's median batch time over the
first variant's, after a warm-up of 5 batches. Nothing waits in Kafka after a batch, so each
runs as a small one (interpreted projections); with --backlog, as part of a catch-up (generated
code), e.g. `--events-per-batch 200000 --minutes-per-batch 1 --batches 12 --backlog` for the
live stream's largest batches.
Results go to bench/results/speed_write_threads-<timestamp>.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.report import save_results
from bench.speed_aging import OUT, kafka_batch
from bench.speed_layer import bench_settings
from lakehouse.core import delta_io
from lakehouse.core.spark import DELTA_LOG_TASKS
from lakehouse.speed import micro_batch
from lakehouse.speed.micro_batch import MicroBatchProcessor

WARM_UP_BATCHES = 5


@dataclass(frozen=True)
class Variant:
    label: str
    write_threads: int | None = None  # None: as configured
    delta_rs_rows: int | None = None  # speed.delta_rs_append_rows; None: as configured
    conf: tuple[str, str] | None = None  # a Spark setting and its value
    txn_checked: bool = False  # every append by Delta's transaction id (append_once)
    spark_small_commits: bool = False  # the few-row appends through Spark, not delta-rs


@contextmanager
def appends_of(variant: Variant) -> Iterator[None]:
    """The variant's appends: the stream's own, each checked by Delta's transaction id, or
    the few-row ones through Spark."""
    if variant.txn_checked:

        def checked(df, table, settings, app_id, batch_id, layout=None, untried=False):  # type: ignore[no-untyped-def]
            delta_io.append_once(df, table, settings, app_id, batch_id, layout)

        with replaced(micro_batch, "append_batch", checked):
            yield
    elif variant.spark_small_commits:

        def small(df, table, settings, app_id, batch_id, untried, layout=None, **bounds):  # type: ignore[no-untyped-def]
            delta_io.append_batch(df, table, settings, app_id, batch_id, layout, untried)

        def rows(spark, rows, table, settings, app_id, batch_id, untried=False):  # type: ignore[no-untyped-def]
            frame = delta_io.small_frame(spark, rows, table)
            delta_io.append_batch(frame, table, settings, app_id, batch_id, untried=untried)

        with (
            replaced(micro_batch, "append_small_batch", small),
            replaced(micro_batch, "append_rows_batch", rows),
        ):
            yield
    else:
        yield


@contextmanager
def replaced(module: Any, name: str, function: Any) -> Iterator[None]:
    own = getattr(module, name)
    setattr(module, name, function)
    try:
        yield
    finally:
        setattr(module, name, own)


def run(
    batches: int, events: int, variants: list[Variant], stamp: str, minutes: float, backlog: bool
) -> dict[str, Any]:
    from lakehouse.core.spark import get_spark

    processors: list[MicroBatchProcessor] = []
    seconds: list[list[float]] = []
    spark = None
    for i, variant in enumerate(variants):
        run_name = f"write-threads-{stamp}-{events}-{i}"
        speed = {
            key: value
            for key, value in (
                ("write_threads", variant.write_threads),
                ("delta_rs_append_rows", variant.delta_rs_rows),
            )
            if value is not None
        }
        settings = bench_settings("local", "bench-write-threads", run_name, **speed)
        spark = spark or get_spark("bench-speed-write-threads", settings)
        checkpoint = Path(f"/tmp/tributary-bench/{run_name}/checkpoint")
        checkpoint.mkdir(parents=True)
        # The processor takes its writer id from the streaming checkpoint's query id.
        (checkpoint / "metadata").write_text(json.dumps({"id": run_name}) + "\n")
        # The Kafka lag each batch leaves, which decides whether the next one is small.
        lag: dict[int, int] = {0: 10**9} if backlog else {}
        processors.append(MicroBatchProcessor(settings, OUT, str(checkpoint), lag.copy))
        seconds.append([])
    assert spark is not None, "at least one variant"
    keys = {v.conf[0] for v in variants if v.conf is not None}
    delta_io.HOW_TO_RUN = tuple(dict.fromkeys([*delta_io.HOW_TO_RUN, *keys]))
    start = datetime.now(UTC) - timedelta(minutes=batches * minutes + 5)
    for index in range(batches):
        batch = kafka_batch(spark, index, events, start, minutes).localCheckpoint()
        order = list(range(len(variants)))
        for i in order if index % 2 == 0 else reversed(order):
            conf = variants[i].conf
            if conf is not None:
                spark.conf.set(*conf)
            began = time.monotonic()
            with appends_of(variants[i]):
                processors[i](batch, index)
            seconds[i].append(time.monotonic() - began)
        took = ", ".join(f"{s[-1]:.2f}" for s in seconds)
        print(f"{events} records, batch {index + 1}/{batches}: {took} s", flush=True)
    medians = [statistics.median(s[WARM_UP_BATCHES:]) for s in seconds]
    return {
        variant.label: {
            "median_batch_seconds": round(median, 2),
            "p90_batch_seconds": round(statistics.quantiles(s[WARM_UP_BATCHES:], n=10)[-1], 2),
            "max_batch_seconds": round(max(s[WARM_UP_BATCHES:]), 2),
            "ratio_to_first": round(median / medians[0], 2),
        }
        for variant, median, s in zip(variants, medians, seconds, strict=True)
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        allow_abbrev=False,
        prog="python -m bench.speed_write_threads",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--batches", type=int, default=30)
    parser.add_argument("--events-per-batch", type=int, nargs="+", default=[300, 2500])
    vary = parser.add_mutually_exclusive_group()
    vary.add_argument("--threads", type=int, nargs="+")
    vary.add_argument("--delta-log-tasks", type=int, nargs="+")
    vary.add_argument("--conf", nargs="+", metavar=("KEY", "VALUE"))
    vary.add_argument("--untried-appends", action="store_true")
    vary.add_argument("--small-commits", action="store_true")
    vary.add_argument("--delta-rs-rows", type=int, nargs="+")
    parser.add_argument("--minutes-per-batch", type=float, default=0.1)
    parser.add_argument("--backlog", action="store_true")
    args = parser.parse_args()
    if args.batches <= WARM_UP_BATCHES + 1:
        parser.error(f"--batches must be more than {WARM_UP_BATCHES + 1}")
    if args.conf and len(args.conf) < 3:
        parser.error("--conf takes a setting and at least two values")
    if args.delta_log_tasks:
        args.conf = [DELTA_LOG_TASKS, *(str(n) for n in args.delta_log_tasks)]
    if args.conf:
        key, *values = args.conf
        variants = [Variant(f"{key}={value}", conf=(key, value)) for value in values]
    elif args.untried_appends:
        variants = [Variant("txn_checked", txn_checked=True), Variant("untried_unchecked")]
    elif args.delta_rs_rows:
        variants = [Variant(f"delta_rs_rows={n}", delta_rs_rows=n) for n in args.delta_rs_rows]
    elif args.small_commits:
        variants = [
            Variant("spark_small_commits", spark_small_commits=True, delta_rs_rows=0),
            Variant("delta_rs"),
        ]
    else:
        variants = [Variant(str(t), write_threads=t) for t in args.threads or [1, 4]]
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    result = {
        "run": stamp,
        "machine": "2 cores, 24 GiB",
        "batches": args.batches,
        "warm_up_batches": WARM_UP_BATCHES,
        "minutes_per_batch": args.minutes_per_batch,
        "backlog": args.backlog,
        **{
            f"records_{events}": run(
                args.batches, events, variants, stamp, args.minutes_per_batch, args.backlog
            )
            for events in args.events_per_batch
        },
    }
    save_results("speed_write_threads", stamp, result)


if __name__ == "__main__":
    main()
