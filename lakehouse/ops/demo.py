"""The main job end to end, as `make demo` runs it (`python -m jobs.demo` prints its outcome).

Produce click-stream events, anomalies included, with a ledger; run the speed layer until it
has caught up with the log (or wait for the one already running); account for every record;
in lambda mode recompute the last closed hour and read the serving layer across its seam; and
follow one UPDATE in PostgreSQL to the current and history tables (lakehouse.ops.demo_cdc).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from lakehouse.core.config import Settings
from lakehouse.core.delta_io import read_table
from lakehouse.core.kafka_io import ensure_topic
from lakehouse.core.locks import exclusive_writer
from lakehouse.core.paths import state_dir
from lakehouse.core.spark import get_spark
from lakehouse.core.storage import ensure_bucket
from lakehouse.core.tables import BATCH
from lakehouse.generator.clickstream import ANOMALY_PRESETS, GeneratorConfig, produce
from lakehouse.ops.demo_cdc import CdcReport, run_cdc_demo
from lakehouse.ops.demo_joins import JoinsReport, run_joins_demo
from lakehouse.speed import stream
from lakehouse.speed.accounting import Accounting, account, quarantine_reasons
from lakehouse.speed.outputs import SpeedOutputs

if TYPE_CHECKING:
    from pyspark.sql import Row, SparkSession

    from lakehouse.batch.recompute import BatchRun, Interval

OUT = SpeedOutputs.live()
NEWEST_WINDOWS = 6  # the newest rows of speed.event_counts_1m in the report
BATCH_LOCK_WAIT_SECONDS = 300
DEMO_MICRO_BATCHES = 5  # the speed layer reads the demo's events in about this many


@dataclass(frozen=True)
class SeamReport:
    """The batch layer's run over the last closed hour, and the serving layer across it."""

    interval: Interval
    run: BatchRun | None  # None: nothing recomputed (`not_run` says why)
    not_run: str | None
    high_water: datetime | None  # batch results up to here, speed results after
    windows_per_source: list[tuple[str, int]]  # serving.event_counts_1m from the hour on


@dataclass(frozen=True)
class DemoReport:
    caught_up: str  # the speed layer's own line
    accounting: Accounting
    reasons: list[tuple[str, int]]  # quarantine reasons, the most common first
    newest_windows: list[Row]
    seam: SeamReport | None  # lambda mode only
    cdc: CdcReport | None = None
    joins: JoinsReport | None = None


def run_demo(settings: Settings, events: int, seed: int, say: Callable[[str], None]) -> DemoReport:
    """Run the demo; `say` gets its progress lines. Raises what a missing service, the
    configuration or a busy writer raise (lakehouse.core's errors, TimeoutError)."""
    if settings.storage.on_s3:
        ensure_bucket(settings)
    ensure_topic(settings)
    say(f"==> producing {events} events (seed {seed}) to {settings.kafka.topic!r}")
    produce_events(settings, events, seed)
    say("==> starting Spark")
    spark = get_spark("demo", settings)
    # In several micro-batches, as a running stream reads: the watermark the first ones move
    # sets the late events of the later ones aside (in one batch, none would be late).
    per_batch = max(1, math.ceil(events / DEMO_MICRO_BATCHES))
    speed = settings.speed.model_copy(update={"max_offsets_per_trigger": per_batch})
    caught_up = stream.catch_up(spark, settings.model_copy(update={"speed": speed}), say)
    cdc = run_cdc_demo(spark, settings, say)
    # The join reads the history tables the change data capture part fills.
    joins = (
        run_joins_demo(spark, settings, say)
        if cdc.failed is None
        else JoinsReport(failed="it needs the change data capture part's history tables")
    )
    return DemoReport(
        caught_up=caught_up,
        accounting=account(spark, settings, OUT),
        reasons=quarantine_reasons(spark, settings, OUT),
        newest_windows=newest_windows(spark, settings),
        seam=last_hour_across_the_seam(spark, settings, say) if settings.mode == "lambda" else None,
        cdc=cdc,
        joins=joins,
    )


def produce_events(settings: Settings, count: int, seed: int) -> dict[str, object]:
    """`count` events with the default anomalies, their event times over the last hour (so
    windows close and some events arrive late); the ledger goes to <state>/ledgers/."""
    anomalies: dict[str, Any] = dict(ANOMALY_PRESETS["default"])
    cfg = GeneratorConfig(
        count=count,
        seed=seed,
        start=datetime.now(UTC) - timedelta(hours=1),
        rate=max(count / 3000, 0.1),
        **anomalies,
    )
    ledger = state_dir() / "ledgers" / f"demo-{datetime.now(UTC):%Y%m%dT%H%M%S}-seed{seed}.jsonl"
    return produce(settings, cfg, ledger)


def newest_windows(spark: SparkSession, settings: Settings) -> list[Row]:
    from pyspark.sql import functions as F

    return (
        read_table(spark, OUT.counts, settings)
        .orderBy(F.desc("window_start"), "event_type")
        .limit(NEWEST_WINDOWS)
        .collect()
    )


def last_hour_across_the_seam(
    spark: SparkSession, settings: Settings, say: Callable[[str], None]
) -> SeamReport:
    from lakehouse.batch.recompute import (
        Interval,
        IntervalUnchanged,
        NoDataError,
        recompute_interval,
    )
    from lakehouse.serving.serve import serve

    hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    interval = Interval(hour - timedelta(hours=1), hour)
    say(f"\n==> batch layer: recomputing {interval} from bronze")
    run, not_run = None, None
    try:
        with exclusive_writer(settings, BATCH, wait_seconds=BATCH_LOCK_WAIT_SECONDS):
            run = recompute_interval(
                spark, settings, interval, f"demo:{datetime.now(UTC):%Y%m%dT%H%M%S}"
            )
    except IntervalUnchanged as err:  # an earlier demo's run of the hour stands: served
        not_run = str(err)
    except NoDataError as err:
        return SeamReport(interval, None, str(err), None, [])
    served, coverage = serve(spark, settings, "event_counts_1m", interval.start)
    per_source = served.groupBy("source").count().orderBy("source").collect()
    return SeamReport(
        interval,
        run,
        not_run,
        coverage.high_water,
        [(r["source"], int(r["count"])) for r in per_source],
    )
