"""The main job end to end, as `make demo` runs it.

    python -m jobs.demo [--events N] [--seed S]

1. produces N click-stream events to the `events` topic, with the generator's default mix of
   anomalies (malformed JSON, wrong types, missing fields, duplicates, late, far-future and
   oversized records), and keeps a ledger of what it sent;
2. runs the speed layer over the log until it has caught up (or, when the speed layer is
   already running, e.g. started by Airflow, waits for it to catch up);
3. prints what landed where, checks that every record is accounted for, and says where to look.
"""

from __future__ import annotations

import argparse
import random
import sys
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from jobs.arguments import OneLineParser, say
from jobs.contract import Exit
from lakehouse.core.config import DEFAULT_PROFILE, PROFILE_ENV, ConfigError, Settings, get_settings
from lakehouse.core.kafka_io import KafkaUnavailableError, ensure_topic
from lakehouse.core.locks import WriterBusyError, exclusive_writer
from lakehouse.core.paths import state_dir
from lakehouse.core.secrets import secrets_file
from lakehouse.core.spark import SparkSetupError, get_spark
from lakehouse.core.storage import StorageError, ensure_bucket
from lakehouse.generator.clickstream import ANOMALY_PRESETS, GeneratorConfig, produce
from lakehouse.speed import stream
from lakehouse.speed.accounting import account, quarantine_reasons
from lakehouse.speed.micro_batch import SpeedOutputs

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

OUT = SpeedOutputs.live()
QUARANTINE_REASONS_SHOWN = 8


def produce_events(settings: Settings, count: int, seed: int) -> dict[str, object]:
    # Event times span the last ~50 minutes, so windows close and some events arrive late.
    anomalies: dict[str, Any] = dict(ANOMALY_PRESETS["default"])
    cfg = GeneratorConfig(
        count=count,
        seed=seed,
        start=datetime.now(UTC) - timedelta(hours=1),
        rate=max(count / 3000, 0.1),
        **anomalies,
    )
    ledger = state_dir() / "ledgers" / f"demo-{datetime.now(UTC):%Y%m%dT%H%M%S}-seed{seed}.jsonl"
    print(f"==> producing {count} events (seed {seed}) to {settings.kafka.topic!r}", flush=True)
    return produce(settings, cfg, ledger)


def report(spark: SparkSession, settings: Settings) -> dict[str, int]:
    from pyspark.sql import functions as F

    counts = account(spark, settings, OUT)
    print("\n==> accounting over the whole log")
    print(
        f"    consumed {counts.consumed} = silver {counts.silver} + quarantined "
        f"{counts.quarantined} + duplicates {counts.duplicates}   "
        f"[{'balanced' if counts.balanced else 'NOT BALANCED'}]"
    )
    print(f"    late events set aside: {counts.late}")
    reasons = quarantine_reasons(spark, settings, OUT)
    shown = reasons[:QUARANTINE_REASONS_SHOWN]
    print(f"    quarantine reasons ({len(shown)} most common of {len(reasons)}):")
    for reason, count in shown:
        print(f"      {count:6}  {reason}")
    if rest := reasons[QUARANTINE_REASONS_SHOWN:]:
        print(
            f"      {sum(count for _, count in rest):6}  ({len(rest)} other reasons; every "
            "record with its reasons is in bronze.quarantine)"
        )
    print("    newest 1-minute windows (speed.event_counts_1m):")
    for r in (
        spark.read.format("delta")
        .load(OUT.counts.path(settings))
        .orderBy(F.desc("window_start"), "event_type")
        .limit(6)
        .collect()
    ):
        print(
            f"      {r['window_start']:%Y-%m-%d %H:%M}  {r['event_type']:12} "
            f"{r['events']:5} events  {r['amount_sum']:>10} amount"
        )
    if not counts.balanced:
        raise AssertionError("the accounting does not balance: a record was lost")
    return asdict(counts)


def catch_up(spark: SparkSession, settings: Settings) -> str:
    return stream.catch_up(spark, settings, say)


def batch_and_serve(spark: SparkSession, settings: Settings) -> None:
    """Recompute the last closed hour in the batch layer, then show the serving layer's seam."""
    from lakehouse.batch.recompute import Interval, NoDataError, recompute_interval
    from lakehouse.core.tables import BATCH
    from lakehouse.serving.serve import serve

    hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    interval = Interval(hour - timedelta(hours=1), hour)
    print(f"\n==> batch layer: recomputing {interval} from bronze", flush=True)
    try:
        with exclusive_writer(settings, BATCH, wait_seconds=300):
            run = recompute_interval(
                spark, settings, interval, f"demo:{datetime.now(UTC):%Y%m%dT%H%M%S}"
            )
    except NoDataError as err:
        print(f"    {err}")
        return
    for v in run.views:
        print(f"    batch.{v.view}: {v.rows} rows, final until {v.final_until:%H:%M}")
    served, coverage = serve(spark, settings, "event_counts_1m", interval.start)
    seam = coverage.high_water
    print(
        f"    serving.event_counts_1m per source (batch up to {seam:%H:%M}, speed after):"
        if seam
        else "    serving: speed only"
    )
    for r in served.groupBy("source").count().orderBy("source").collect():
        print(f"      {r['source']:6} {r['count']:5} windows")


def print_where_to_look(settings: Settings) -> None:
    print("\nWhere to look:")
    print(
        f"  Airflow UI   {settings.airflow.url}  (user {settings.airflow.admin_user}, "
        f"password: AIRFLOW_ADMIN_PASSWORD in {secrets_file()})"
    )
    print(f"  Lakehouse    {settings.storage.root}  (bronze/, silver/, speed/, batch/, dq/, ops/)")
    print(f"  Ledgers      {state_dir() / 'ledgers'}")
    # Commands copied from here must read this demo's lakehouse, not the default profile's.
    env = "" if settings.profile == DEFAULT_PROFILE else f"{PROFILE_ENV}={settings.profile} "
    print(f"  Query        {env}.venv/bin/tributary query event_counts_1m --from <ISO time>")
    print(f'               {env}.venv/bin/tributary sql "SELECT * FROM serving_user_sessions"')
    print(f'  Recompute    {env}make batch ARGS="--start <ISO> --end <ISO>"  (or batch_layer)')
    print(f"  Replay       {env}.venv/bin/python -m jobs.replay --dry-run  (or kappa_replay)")
    print("  Services     make status    (logs are listed there)")
    print("  Stop all     make down")


def main(argv: list[str]) -> Exit:
    parser = OneLineParser(
        prog="python -m jobs.demo",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--events", type=int, default=5000, help="how many events to produce")
    parser.add_argument(
        "--seed",
        type=int,
        default=None,
        help="generator seed (default: a new one, so reruns add new events)",
    )
    args = parser.parse_args(argv)
    if not 1 <= args.events <= 1_000_000:
        parser.error("--events must be between 1 and 1000000")
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1, 10**6)
    try:
        settings = get_settings()
        if settings.storage.on_s3:
            ensure_bucket(settings)
        ensure_topic(settings)
        produce_events(settings, args.events, seed)
        print("==> starting Spark", flush=True)
        spark = get_spark("demo", settings)
        print(f"    {catch_up(spark, settings)}")
        report(spark, settings)
        if settings.mode == "lambda":
            batch_and_serve(spark, settings)
    except (
        WriterBusyError,
        ConfigError,
        KafkaUnavailableError,
        SparkSetupError,
        StorageError,
        ValueError,
        TimeoutError,
    ) as err:
        print(f"demo failed: {err}", file=sys.stderr)
        return Exit.CANNOT_RUN
    print_where_to_look(settings)
    return Exit.OK


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
