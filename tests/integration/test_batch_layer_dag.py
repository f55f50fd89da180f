"""The batch_layer DAG, run for real by the running Airflow: two consecutive hours triggered
with their data intervals, then a backfill, each recomputing from the services' bronze.

The events go to the real `events` topic with event times in hours picked at random far in
the past, so no other test's events share them; the speed layer is caught up in-process
(unless the supervised stream is running, which then catches up by itself).
"""

from __future__ import annotations

import os
import random
import uuid
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pandas as pd
import pytest

from lakehouse.core.config import Settings, load_settings
from lakehouse.core.delta_io import read_table
from lakehouse.core.kafka_offsets import end_offsets
from lakehouse.core.locks import exclusive_writer
from lakehouse.core.tables import table
from lakehouse.generator.clickstream import GeneratorConfig, produce, read_ledger
from lakehouse.speed.micro_batch import SpeedOutputs
from lakehouse.speed.stream import start_query
from lakehouse.speed.supervisor import SpeedLayerSupervisor
from tests.integration import airflow_client as af

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DAG_ID = "batch_layer"
RUN_TIMEOUT = 600
HOUR = timedelta(hours=1)


@pytest.fixture(scope="module")
def services_settings() -> Settings:
    """What the Airflow services use: the same environment, no test overrides."""
    return load_settings(environ=dict(os.environ))


@pytest.fixture(scope="module")
def past_hours(
    api: af.Api,
    spark: SparkSession,
    services_settings: Settings,
    kafka_up: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[datetime, pd.DataFrame]:
    """Four hours of events, long ago, in the services' bronze; (first hour, accepted events)."""
    first = _unused_hours(api)
    ledger_path = tmp_path_factory.mktemp("batch_dag") / "ledger.jsonl"
    cfg = GeneratorConfig(
        count=240, seed=random.randint(1, 10**9), start=first, rate=240 / (4 * 3600), users=12
    )
    produce(services_settings, cfg, ledger_path)
    catch_up_speed_layer(spark, services_settings)
    ledger = pd.DataFrame(read_ledger(ledger_path))
    ledger["event_time"] = pd.to_datetime(ledger["event_time"], utc=True)
    return first, ledger[ledger["expected"] == "silver"]


def catch_up_speed_layer(spark: SparkSession, settings: Settings) -> None:
    goal = end_offsets(settings)
    if SpeedLayerSupervisor(settings).status().running:
        progress = table("ops.speed_progress").path(settings)

        def caught_up() -> bool:
            latest = spark.read.format("delta").load(progress).orderBy("processed_at").tail(1)
            done = dict(latest[0]["offsets"]) if latest else {}
            return all(done.get(p, 0) >= end for p, end in goal.items())

        af.wait_until(caught_up, 300, "the running speed layer to catch up", interval=3)
        return
    with exclusive_writer(settings, "speed_layer"):
        start_query(spark, settings, SpeedOutputs.live(), available_now=True).awaitTermination()


def batch_counts(spark: SparkSession, settings: Settings, start: datetime) -> int:
    counts = read_table(spark, table("batch.event_counts_1m"), settings)
    window = (counts["window_start"] >= start) & (counts["window_start"] < start + HOUR)
    return int(counts.where(window).groupBy().sum("events").first()[0] or 0)


def recorded_runs(spark: SparkSession, settings: Settings) -> pd.DataFrame:
    runs = read_table(spark, table("ops.batch_runs"), settings)
    return runs.select("run_id", "view", "interval_start", "interval_end").toPandas()


def test_two_consecutive_hours_and_a_backfill(
    api: af.Api, spark: SparkSession, services_settings: Settings, past_hours: Any
) -> None:
    first, accepted = past_hours
    af.wait_parsed(api, DAG_ID)
    with af.unpaused(api, DAG_ID):
        run_ids = [_trigger_interval(api, first + k * HOUR) for k in (0, 1)]
        for run_id in run_ids:
            _assert_success(api, run_id)
        # Each run's asset events name the interval it recomputed (data_quality reads them).
        events = af.expect_json(
            api.call(
                "GET",
                "/assets/events",
                params={"source_dag_id": DAG_ID, "source_run_id": run_ids[0], "limit": 10},
            ),
            200,
        )["asset_events"]
        assert len(events) == 3, events
        assert {
            (
                pd.Timestamp(e["extra"]["interval_start"]),
                pd.Timestamp(e["extra"]["interval_end"]),
            )
            for e in events
        } == {(pd.Timestamp(first), pd.Timestamp(first + HOUR))}, events
        backfill = af.expect_json(
            api.call(
                "POST",
                "/backfills",
                json={
                    "dag_id": DAG_ID,
                    "from_date": (first + 2 * HOUR).isoformat(),
                    "to_date": (first + 2 * HOUR).isoformat(),
                    "reprocess_behavior": "completed",
                    "max_active_runs": 1,
                },
            ),
            200,
        )
        backfill_runs = _wait_backfill(api, backfill["id"], first + 2 * HOUR)
    assert backfill_runs, "the backfill created no run"

    runs = recorded_runs(spark, services_settings)
    for k, run_id in enumerate([*run_ids, *backfill_runs]):
        mine = runs[runs["run_id"] == run_id]
        assert len(mine) == 3, f"run {run_id} recorded {len(mine)} views, not 3"
        start = first + k * HOUR
        assert set(mine["interval_start"]) == {pd.Timestamp(start.replace(tzinfo=None))}, mine
        expected = int(
            ((accepted["event_time"] >= start) & (accepted["event_time"] < start + HOUR)).sum()
        )
        assert expected > 20
        assert batch_counts(spark, services_settings, start) == expected, f"hour {k}"


def test_a_reversed_interval_from_the_form_fails_with_the_reason(api: af.Api) -> None:
    af.wait_parsed(api, DAG_ID)
    with af.unpaused(api, DAG_ID):
        run = af.trigger_run(
            api, DAG_ID, conf={"start": "2026-01-01T11:00:00Z", "end": "2026-01-01T10:00:00Z"}
        )
        run, tis = af.wait_for_run(api, DAG_ID, run["dag_run_id"], RUN_TIMEOUT)
    logs = af.task_logs(api, DAG_ID, run["dag_run_id"], tis)
    assert run["state"] == "failed", af.tasks_report(tis, logs)
    assert "empty or reversed" in logs["recompute"], logs["recompute"]
    assert af.task_states(tis) == {"recompute": "failed"}
    assert [ti["try_number"] for ti in tis] == [1], "a bad interval is not retried"


# --- helpers -------------------------------------------------------------------------------


def _unused_hours(api: af.Api) -> datetime:
    """The first of four hours long ago that no earlier test run used. The services keep their
    state between runs: an hour an earlier run chose holds its events and its DAG runs (a
    second run for the same logical date is refused), and that run's four hours of events
    began at most four hours before a DAG run of its own."""
    this_hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    for _ in range(100):
        # Long ago, yet after the DAG's start_date (runs before it get no tasks).
        first = this_hour - random.randint(100, 5_000) * HOUR
        taken = af.expect_json(
            api.call(
                "GET",
                f"/dags/{DAG_ID}/dagRuns",
                params={
                    "logical_date_gte": (first - 4 * HOUR).isoformat(),
                    "logical_date_lte": (first + 5 * HOUR).isoformat(),
                    "limit": 1,
                },
            ),
            200,
        )["total_entries"]
        if not taken:
            return first
    raise AssertionError("no four unused hours found in 5,000: the services' state is full")


def _trigger_interval(api: af.Api, start: datetime) -> str:
    run_id = f"test_{uuid.uuid4().hex[:12]}"
    body = {
        "dag_run_id": run_id,
        "logical_date": start.isoformat(),
        "data_interval_start": start.isoformat(),
        "data_interval_end": (start + HOUR).isoformat(),
    }
    af.expect_json(api.call("POST", f"/dags/{DAG_ID}/dagRuns", json=body), 200)
    return run_id


def _assert_success(api: af.Api, run_id: str) -> None:
    run, tis = af.wait_for_run(api, DAG_ID, run_id, RUN_TIMEOUT)
    if run["state"] != "success":
        report = af.tasks_report(tis, af.task_logs(api, DAG_ID, run_id, tis), lines=40)
        pytest.fail(f"run {run_id} is {run['state']!r}; tasks:\n{report}")


def _wait_backfill(api: af.Api, backfill_id: int, start: datetime) -> list[str]:
    """The backfill's run ids (its runs start at `start`), once all finished successfully."""

    def runs() -> list[dict[str, Any]]:
        found = af.expect_json(
            api.call(
                "GET",
                f"/dags/{DAG_ID}/dagRuns",
                params={"run_type": "backfill", "logical_date_gte": start.isoformat()},
            ),
            200,
        )["dag_runs"]
        return [r for r in found if datetime.fromisoformat(r["logical_date"]) == start]

    af.wait_until(
        lambda: bool(runs()) and all(r["state"] in af.FINAL_STATES for r in runs()),
        RUN_TIMEOUT,
        f"backfill {backfill_id} to finish",
        interval=3,
    )
    finished = sorted(runs(), key=lambda r: r["logical_date"])
    for r in finished:
        _assert_success(api, r["dag_run_id"])
    return [r["dag_run_id"] for r in finished]
