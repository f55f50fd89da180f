"""The batch_layer DAG run for real by the running Airflow, and the reconcile DAG it triggers:
a run for an hour long ago (its data interval given, as a past interval is recomputed by hand)
recomputes that hour from the services' bronze, records it and names its interval on the
three assets' events; those events make Airflow start a reconciliation of exactly that
interval, which passes its gate, records its windows in dq.* and writes its HTML report. The
same run's `revenue` task recomputes the hour's revenue view (the enrichment stream has run),
records and announces it. A second run of the hour, with nothing new within its reach, is
skipped and says why.

The hour's events are in the services' bronze and silver (tests/integration/batch_hours.py),
and the enrichment stream has read silver (in-process, before the run).

One real run of each DAG proves they run in Airflow; what else they do is proven where it is
cheaper: the hours the timetable gives a manual run, consecutive scheduled runs and a
backfill's runs (all the timetable's data intervals), the task's kappa-mode skip and its
refusal of a reversed interval, in tests/dags/test_batch_layer_schedule.py; what a reconcile
run compares (the triggering batch runs, a replay, the form's sides, view and range) in
tests/dags/test_reconcile_triggers.py; consecutive hourly runs against one daily run in
test_batch_layer.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
import pytest
from pyspark.sql import functions as F

from lakehouse.cdc.changelog import history_table
from lakehouse.cdc.shop import PRODUCTS, USERS
from lakehouse.core.config import Settings
from lakehouse.core.delta_io import read_table
from lakehouse.core.locks import exclusive_writer
from lakehouse.core.small_tables import table_version
from lakehouse.core.tables import table
from lakehouse.core.times import from_micros
from lakehouse.joins.outputs import EnrichmentOutputs
from lakehouse.joins.stream import start_enrichment_query
from tests.integration import airflow_client as af
from tests.integration.batch_hours import (
    DAG_ID,
    HOUR,
    REVENUE_URI,
    asset_events,
    past_hour_in_bronze,
    trigger_hour,
    views_task_state,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

RECONCILE = "reconcile"
RUN_TIMEOUT = 900
REPORT_LINE = "reconcile report: "
VIEWS = {"event_counts_1m", "active_users_10m", "user_sessions"}


@dataclass(frozen=True)
class BatchRun:
    hour: datetime
    accepted: pd.DataFrame  # the ledger's events silver accepts
    run_id: str  # finished successfully


@pytest.fixture(scope="module")
def batch_run(
    api: af.Api,
    spark: SparkSession,
    services_settings: Settings,
    kafka_up: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[BatchRun]:
    """An hour of events long ago in the services' bronze and speed layer, a few events three
    hours on, and a batch_layer run of that hour, finished; reconcile unpaused until the
    module ends (the run the batch run's assets trigger must be able to start), then put back
    as it was."""
    af.wait_parsed(api, RECONCILE)
    past = past_hour_in_bronze(api, spark, services_settings, tmp_path_factory.mktemp("batch_dag"))
    _enrichment_caught_up(spark, services_settings)
    with af.unpaused(api, RECONCILE):
        yield BatchRun(past.hour, past.accepted, _run_hour(api, past.hour))


def test_a_past_hour_is_recomputed_recorded_and_announced(
    api: af.Api, spark: SparkSession, services_settings: Settings, batch_run: BatchRun
) -> None:
    run_id = batch_run.run_id
    start = batch_run.hour
    runs = read_table(spark, table("ops.batch_runs"), services_settings)
    mine = runs.where(runs["run_id"] == run_id).select("view", "interval_start").toPandas()
    # The click views' rows, and the revenue view's (its own test, below).
    assert set(mine["view"]) == {*VIEWS, "revenue_by_segment"}, mine
    assert set(mine["interval_start"]) == {pd.Timestamp(start.replace(tzinfo=None))}, mine

    accepted = batch_run.accepted
    in_hour = (accepted["event_time"] >= start) & (accepted["event_time"] < start + HOUR)
    expected = int(in_hour.sum())
    assert expected > 20
    counts = read_table(spark, table("batch.event_counts_1m"), services_settings)
    window = (counts["window_start"] >= start) & (counts["window_start"] < start + HOUR)
    assert int(counts.where(window).groupBy().sum("events").first()[0] or 0) == expected

    # Its asset events name the interval it recomputed (data_quality and reconcile read it).
    events = asset_events(api, run_id)
    assert {e["uri"] for e in events} == {f"tributary://batch/{v}" for v in VIEWS}, events
    assert {
        (pd.Timestamp(e["extra"]["interval_start"]), pd.Timestamp(e["extra"]["interval_end"]))
        for e in events
    } == {(pd.Timestamp(start), pd.Timestamp(start + HOUR))}, events


def test_the_batch_run_triggers_a_reconciliation_of_its_interval(
    api: af.Api, spark: SparkSession, services_settings: Settings, batch_run: BatchRun
) -> None:
    batch_run_id = batch_run.run_id
    found: list[str] = []

    def triggered() -> bool:
        found[:] = _triggered_by(api, batch_run_id)
        return bool(found)

    af.wait_until(triggered, RUN_TIMEOUT, f"a reconcile run triggered by {batch_run_id}", 5)
    run, tis = af.wait_for_run(api, RECONCILE, found[0], RUN_TIMEOUT)
    logs = af.task_logs(api, RECONCILE, run["dag_run_id"], tis)
    assert run["state"] == "success", af.tasks_report(tis, logs, lines=60)
    assert run["run_type"] == "asset_triggered"
    log = logs["compare"]
    assert f"--batch-run {batch_run_id}" in log, log[-3000:]
    # Other batch runs may have triggered it too: it compares each one's interval.
    start = batch_run.hour
    assert f"[{start:%Y-%m-%dT%H:%M:%SZ}, {start + HOUR:%Y-%m-%dT%H:%M:%SZ})" in log, log[-3000:]

    report = _report_path(log)
    assert report.exists(), f"the log names {report}, which does not exist"
    html = report.read_text()
    assert '<svg class="chart"' in html and 'id="summary"' in html and "gate passed" in html
    # The run's Results link opens the same report through the Tributary view.
    url, linked = af.results_page(api, RECONCILE, run["dag_run_id"], "compare")
    assert url.endswith(f"/reports/{report.name}") and linked == html, url

    recorded = _recorded(spark, services_settings, run["dag_run_id"])
    assert {r["view"] for r in recorded} == VIEWS, recorded
    assert all(r["verdict"] == "passed" and r["report_path"] == str(report) for r in recorded)
    assert sum(r["compared"] for r in recorded) > 20, recorded
    assert sum(r["unexplained"] for r in recorded) == 0, recorded


def test_the_run_recomputes_records_and_announces_the_hours_revenue_view(
    api: af.Api, spark: SparkSession, services_settings: Settings, batch_run: BatchRun
) -> None:
    """Its purchases and revenue are the ledger's accepted purchases of the hour, each
    counted under its user's segment and product's category, or the reason it has none."""
    run_id, start = batch_run.run_id, batch_run.hour
    path = f"/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances/revenue"
    ti = af.expect_json(api.call("GET", path), 200)
    assert ti["state"] == "success", af.tasks_report([ti], af.task_logs(api, DAG_ID, run_id, [ti]))

    runs = read_table(spark, table("ops.batch_runs"), services_settings)
    mine = runs.where((runs["run_id"] == run_id) & (runs["view"] == "revenue_by_segment"))
    recorded = [from_micros(r[0]) for r in mine.select(F.unix_micros("interval_start")).collect()]
    assert recorded == [start], recorded
    rows = read_table(spark, table("batch.revenue_by_segment"), services_settings).where(
        (F.col("window_start") >= start) & (F.col("window_start") < start + HOUR)
    )
    [[purchases, revenue]] = rows.agg(F.sum("purchases"), F.sum("revenue")).collect()
    accepted = batch_run.accepted
    bought = accepted[
        (accepted["event_type"] == "purchase")
        & (accepted["event_time"] >= start)
        & (accepted["event_time"] < start + HOUR)
    ]
    assert len(bought) > 0
    paid = sum((Decimal(str(a)) for a in bought["amount"] if a == a), Decimal(0))  # NaN: none
    assert (purchases, revenue) == (len(bought), paid)

    events = asset_events(api, run_id, revenue=True)
    assert [e["uri"] for e in events] == [REVENUE_URI], events
    assert pd.Timestamp(events[0]["extra"]["interval_start"]) == pd.Timestamp(start), events


def test_a_second_run_of_the_hour_is_a_no_op_that_says_so(
    api: af.Api, services_settings: Settings, batch_run: BatchRun
) -> None:
    """Nothing within the hour's reach has reached bronze since its run (its events are long
    ago, and no other test's are near them), nor has a history table changed: a second run of
    it, from the form, skips both its tasks, each naming the run it stands on, and announces
    nothing."""
    start = batch_run.hour
    conf = {"start": start.isoformat(), "end": (start + HOUR).isoformat()}
    histories = _history_versions(services_settings)
    run_id = af.new_run_id()
    body = {"dag_run_id": run_id, "logical_date": None, "conf": conf}
    af.expect_json(
        api.call(
            "POST", f"/dags/{DAG_ID}/dagRuns", json={**body, "run_after": af.BEFORE_SCHEDULED_RUNS}
        ),
        200,
    )
    _, tis = af.run_alone(api, DAG_ID, run_id, RUN_TIMEOUT)
    [views] = [ti for ti in tis if ti["task_id"] == "recompute"]
    log = af.task_log(api, DAG_ID, run_id, views)
    assert views_task_state(tis) == "skipped", af.tail(log, 40)
    assert f"unchanged since run {batch_run.run_id} (" in log, af.tail(log, 40)
    assert asset_events(api, run_id) == []
    # So is the revenue view's, bronze and the history tables as its last run read them;
    # unless a CDC test beside this one moved a history table meanwhile: then it recomputes.
    [revenue] = [ti for ti in tis if ti["task_id"] == "revenue"]
    log = af.task_log(api, DAG_ID, run_id, revenue)
    if _history_versions(services_settings) == histories:
        assert revenue["state"] == "skipped", af.tail(log, 40)
        assert f"unchanged since run {batch_run.run_id} (bronze and the" in log, af.tail(log)
        assert asset_events(api, run_id, revenue=True) == []
    else:
        assert revenue["state"] == "success", af.tail(log, 40)


# --- helpers -------------------------------------------------------------------------------


def _history_versions(settings: Settings) -> list[int | None]:
    return [table_version(settings, history_table(c)) for c in (USERS, PRODUCTS)]


def _enrichment_caught_up(spark: SparkSession, settings: Settings) -> None:
    """The enrichment stream has read all of silver, so the run's revenue task recomputes."""
    with exclusive_writer(settings, EnrichmentOutputs.live().writer, wait_seconds=120):
        start_enrichment_query(spark, settings, available_now=True).awaitTermination()


def _run_hour(api: af.Api, hour: datetime) -> str:
    """A batch_layer run of `hour` (its data interval), finished successfully, with no
    scheduled run beside it (af.run_alone); its id."""
    run_id = trigger_hour(api, hour)
    _, tis = af.run_alone(api, DAG_ID, run_id, RUN_TIMEOUT)
    if views_task_state(tis) != "success":
        report = af.tasks_report(tis, af.task_logs(api, DAG_ID, run_id, tis), lines=40)
        pytest.fail(f"batch run {run_id} failed; tasks:\n{report}")
    return run_id


def _triggered_by(api: af.Api, batch_run_id: str) -> list[str]:
    runs = af.expect_json(
        api.call(
            "GET",
            f"/dags/{RECONCILE}/dagRuns",
            # The newest first: the services' state keeps every earlier session's runs.
            params={"run_type": "asset_triggered", "order_by": "-id", "limit": 10},
        ),
        200,
    )["dag_runs"]
    mine = []
    # Airflow 3.3.2 answers 500 for the asset events of a run that has not started yet
    # (its AssetEventResponse requires the created run's start_date); the caller polls
    # again, so a queued run is looked at on a later round.
    for r in (r for r in runs if r.get("start_date")):
        events = af.expect_json(
            api.call("GET", f"/dags/{RECONCILE}/dagRuns/{r['dag_run_id']}/upstreamAssetEvents"),
            200,
        )["asset_events"]
        if any(e.get("source_run_id") == batch_run_id for e in events):
            mine.append(r["dag_run_id"])
    return mine


def _report_path(log: str) -> Path:
    lines = [line for line in log.splitlines() if REPORT_LINE in line]
    assert lines, f"the task log names no report:\n{af.tail(log, 40)}"
    return Path(lines[-1].split(REPORT_LINE, 1)[1].strip())


def _recorded(spark: SparkSession, settings: Settings, run_id: str) -> list[dict[str, Any]]:
    runs = read_table(spark, table("dq.reconciliation_runs"), settings)
    return [r.asDict() for r in runs.where(runs["run_id"] == run_id).collect()]
