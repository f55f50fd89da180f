"""Past hours of events in the services' bronze, and batch_layer runs of them, for the tests
that run the batch_layer DAG in the test Airflow.

An hour is picked at random far in the past, so no other test's events share it; its events
go to the real `events` topic (with the default anomalies: late, duplicated, malformed,
future...), and the speed layer is caught up in-process (unless the supervised stream is
running, which then catches up by itself).
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from lakehouse.core.config import Settings
from lakehouse.core.kafka_offsets import end_offsets
from lakehouse.core.locks import WriterBusyError, exclusive_writer
from lakehouse.core.tables import table
from lakehouse.generator.clickstream import (
    GeneratorConfig,
    preset_config,
    produce,
)
from lakehouse.generator.ledger import read_ledger
from lakehouse.speed.outputs import SpeedOutputs
from lakehouse.speed.stream import start_query
from lakehouse.speed.supervisor import SpeedLayerSupervisor
from tests.integration import airflow_client as af

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DAG_ID = "batch_layer"
HOUR = timedelta(hours=1)


@dataclass(frozen=True)
class PastHour:
    hour: datetime
    accepted: pd.DataFrame  # the ledger's events silver accepts

    def accepted_in_hour(self) -> int:
        times = self.accepted["event_time"]
        return int(((times >= self.hour) & (times < self.hour + HOUR)).sum())


def past_hour_in_bronze(
    api: af.Api, spark: SparkSession, settings: Settings, ledgers: Path
) -> PastHour:
    """An unused hour long ago with 150 events in it, and a few events three hours on, all in
    the services' bronze; the ledgers are written under `ledgers`."""
    af.wait_parsed(api, DAG_ID)
    hour = unused_hour(api)
    cfg = preset_config(
        "default",
        {},
        count=150,
        seed=random.randint(1, 10**9),
        start=hour,
        rate=150 / 3600,
        users=20,
    )
    produce(settings, cfg, ledgers / "ledger.jsonl")
    produce_watermark_support(settings, hour + 3 * HOUR, cfg.seed + 1, ledgers)
    catch_up_speed_layer(spark, settings)
    ledger = pd.DataFrame(read_ledger(ledgers / "ledger.jsonl"))
    ledger["event_time"] = pd.to_datetime(ledger["event_time"], utc=True)
    return PastHour(hour, ledger[ledger["expected"] == "silver"])


def produce_watermark_support(
    settings: Settings, start: datetime, seed: int, ledgers: Path, rounds: int = 10
) -> None:
    """Events from `start` (three hours after a past hour: no other run's hours are that near,
    `unused_hour`) until every partition of the topic holds `watermark_support_events` of them:
    the watermark is the least any partition supports, so only then is it past the events a
    run reads beyond the hour, and every view of the hour final, whatever else the services'
    bronze holds. Users map to partitions by key, so one round may leave a partition short."""
    need = settings.speed.watermark_support_events
    counts: Counter[int] = Counter()
    for n in range(rounds):
        later = GeneratorConfig(count=60, seed=seed + n, start=start, rate=0.1, users=20)
        ledger = ledgers / f"later-{n}.jsonl"
        produce(settings, later, ledger)
        counts.update(r["partition"] for r in read_ledger(ledger) if r["expected"] == "silver")
        if all(counts[p] >= need for p in range(settings.kafka.partitions)):
            return
    raise AssertionError(f"{rounds} rounds of events left a partition short of {need}: {counts}")


def catch_up_speed_layer(spark: SparkSession, settings: Settings, timeout: float = 900) -> None:
    """Every record now in Kafka processed by the speed layer: by the supervised stream if it
    runs, else in-process once the writer lock is free (other tests may hold it a while)."""
    goal = end_offsets(settings)
    progress = table("ops.speed_progress").path(settings)

    def done() -> bool:
        latest = spark.read.format("delta").load(progress).orderBy("processed_at").tail(1)
        offsets = dict(latest[0]["offsets"]) if latest else {}
        return all(offsets.get(p, 0) >= end for p, end in goal.items())

    def caught_up() -> bool:
        if SpeedLayerSupervisor(settings).status().running:
            return done()
        try:
            with exclusive_writer(settings, "speed_layer"):
                start_query(
                    spark, settings, SpeedOutputs.live(), available_now=True
                ).awaitTermination()
        except WriterBusyError:
            return False  # another test's stream: it may catch up for us, or let go soon
        return True

    af.wait_until(caught_up, timeout, "the speed layer to catch up", interval=5)


def unused_hour(api: af.Api) -> datetime:
    """An hour long ago that no earlier test run used. The services keep their state between
    runs: an hour an earlier run chose holds its events and its DAG runs (a second run for the
    same logical date is refused), and a run's events span at most its own hour."""
    this_hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    for _ in range(100):
        # Long ago, yet after the DAG's start_date (runs before it get no tasks).
        hour = this_hour - random.randint(100, 5_000) * HOUR
        taken = af.expect_json(
            api.call(
                "GET",
                f"/dags/{DAG_ID}/dagRuns",
                params={
                    "logical_date_gte": (hour - 4 * HOUR).isoformat(),
                    "logical_date_lte": (hour + 4 * HOUR).isoformat(),
                    "limit": 1,
                },
            ),
            200,
        )["total_entries"]
        if not taken:
            return hour
    raise AssertionError("no unused hour found in 5,000: the services' state is full")


def trigger_hour(api: af.Api, hour: datetime) -> str:
    """Trigger a batch_layer run of `hour` (its data interval, as a past hour is recomputed by
    hand), first in line before any scheduled run (af.BEFORE_SCHEDULED_RUNS); its id."""
    run_id = af.new_run_id()
    body = {
        "dag_run_id": run_id,
        "logical_date": hour.isoformat(),
        "data_interval_start": hour.isoformat(),
        "data_interval_end": (hour + HOUR).isoformat(),
        "run_after": af.BEFORE_SCHEDULED_RUNS,
    }
    af.expect_json(api.call("POST", f"/dags/{DAG_ID}/dagRuns", json=body), 200)
    return run_id


def asset_events(api: af.Api, run_id: str, revenue: bool = False) -> list[dict[str, Any]]:
    """The click views' asset events batch_layer run `run_id` emitted, or (`revenue`) its
    revenue task's, which runs only once the enrichment stream has. Airflow 3.3.2 answers 500
    while a run they created has not started yet (its AssetEventResponse requires the run's
    start_date): asked again until it answers."""
    path, params = "/assets/events", {"source_dag_id": DAG_ID, "source_run_id": run_id}
    replies: list[Any] = []

    def answered() -> bool:
        replies[:] = [api.call("GET", path, params={**params, "limit": 10})]
        return replies[0].status_code != 500

    af.wait_until(answered, 120, f"the asset events of {run_id}", interval=2)
    events: list[dict[str, Any]] = af.expect_json(replies[0], 200)["asset_events"]
    return [e for e in events if (e["uri"] == REVENUE_URI) == revenue]


REVENUE_URI = "tributary://batch/revenue_by_segment"


def views_task_state(tis: list[dict[str, Any]]) -> str | None:
    """The state of a batch_layer run's `recompute` task, once its `revenue` task (which runs
    whether the views were recomputed or skipped, and skips while the enrichment stream has
    never run, as in most of the tests' lakehouses) has ended without failing; else None."""
    states = af.task_states(tis)
    return states.get("recompute") if states.get("revenue") in ("success", "skipped") else None
