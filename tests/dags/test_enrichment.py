"""The enrichment DAG's tasks, run here on a state folder and a lakehouse of the test's own: a
stop holds the stream down and skips the health check; the reconcile task runs
jobs.enrich_reconcile (in-process): skipped before the stream's first batch, passed when the
stream equals its recompute, failed naming an event it got wrong."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest

from lakehouse.core.config import Settings, get_settings
from lakehouse.core.paths import STATE_ENV
from tests.dags.conftest import DagFile, load_dag_file

pytestmark = pytest.mark.slow  # make test-fast leaves it out (docs/testing.md)

T0 = datetime(2026, 11, 25, 10, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def enrichment(airflow_home: Path) -> DagFile:
    return load_dag_file("enrichment")


@pytest.fixture
def state(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    monkeypatch.setenv(STATE_ENV, str(tmp_path / "state"))
    get_settings.cache_clear()
    yield tmp_path / "state"
    monkeypatch.undo()
    get_settings.cache_clear()


def test_the_dag_supervises_checks_and_reconciles_every_few_minutes(enrichment: DagFile) -> None:
    dag = enrichment.dag
    assert dag.schedule == timedelta(minutes=5) and dag.max_active_runs == 1
    assert {t.task_id: sorted(t.upstream_task_ids) for t in dag.tasks} == {
        "supervise": [],
        "check_health": ["supervise"],
        "reconcile": ["check_health", "supervise"],
    }


def test_a_stop_holds_the_enrichment_stream_down_and_skips_the_health_check(
    enrichment: DagFile, state: Path
) -> None:
    from airflow.sdk.exceptions import AirflowSkipException

    from dags.support import enrichment_tasks
    from lakehouse.joins.supervisor import EnrichmentSupervisor

    done = enrichment_tasks.supervise_enrichment("stop")
    assert not done["running"] and "stays stopped until a run" in done["outcome"], done
    with pytest.raises(AirflowSkipException, match="nothing to check"):
        enrichment_tasks.check_enrichment(done)
    again = enrichment_tasks.supervise_enrichment("ensure")
    assert "not starting the enrichment stream: stopped on request" in again["outcome"]
    assert EnrichmentSupervisor(get_settings()).held()


def enriched_lakehouse(spark, tmp_path: Path) -> Settings:
    """One enrichment batch over two purchases, on the lakehouse jobs_here runs jobs on."""
    from lakehouse.cdc.changelog import history_table
    from lakehouse.cdc.shop import PRODUCTS, USERS
    from lakehouse.core.frames import rows_frame
    from lakehouse.joins.enrichment import EnrichmentProcessor
    from tests.lakehouses import local_lakehouse
    from tests.micro_batches import query_checkpoint

    settings = local_lakehouse(tmp_path)
    at = T0 + timedelta(minutes=10)
    for captured, values in (
        (USERS, ("u1", "new", "DE")),
        (PRODUCTS, ("p1", "Mug", "kitchen", Decimal("4.00"))),
    ):
        target = history_table(captured)
        row = (*values, T0, T0, None, True, False, 10, None)
        frame = rows_frame(spark, [row], target.spark_schema())
        frame.write.format("delta").save(target.path(settings))
    events = rows_frame(
        spark,
        [(e, "purchase", "u1", "p1", Decimal("2.50"), at, at.date()) for e in ("e1", "e2")],
        "event_id string, event_type string, user_id string, product_id string, "
        "amount decimal(18,2), event_time timestamp, event_date date",
    )
    checkpoint = str(query_checkpoint(tmp_path / "query", "enrichment-dag"))
    EnrichmentProcessor(settings, checkpoint)(events, 0)
    return settings


def test_the_reconcile_task_skips_passes_and_fails_as_the_judge_says(
    spark, jobs_here, tmp_path: Path
) -> None:
    from airflow.sdk.exceptions import AirflowSkipException
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    from dags.support import enrichment_tasks
    from dags.support.failure import Refused
    from lakehouse.joins.enrichment import ENRICHED

    with pytest.raises(AirflowSkipException, match="completed no batch yet"):
        enrichment_tasks.reconcile_enrichment(run=jobs_here)
    settings = enriched_lakehouse(spark, tmp_path)
    passed = enrichment_tasks.reconcile_enrichment(run=jobs_here)
    assert passed["equal"] and passed["events"] == {"compared": 2, "differing": 0}

    rows = DeltaTable.forPath(spark, ENRICHED.path(settings))
    rows.update("event_id = 'e2'", {"segment": F.lit("vip")})
    with pytest.raises(Refused) as refused:
        enrichment_tasks.reconcile_enrichment(run=jobs_here)
    verdict, first, *_ = str(refused.value).splitlines()
    assert verdict == (
        "enrichment reconciliation failed, as of enrichment batch 0: 1 of 2 events and 0 of 1 "
        "windows differ"
    )
    assert first.startswith("event_id=e2: ") and "'segment': 'vip'" in first


def test_the_reconcile_dags_joins_task_records_the_enrichments_judgement(
    spark, jobs_here, tmp_path: Path
) -> None:
    from airflow.sdk.exceptions import AirflowSkipException

    from dags.support.judges import run_judge
    from lakehouse.core.delta_io import read_table
    from lakehouse.core.tables import table

    reconcile = load_dag_file("reconcile").dag
    assert {t.task_id: sorted(t.upstream_task_ids) for t in reconcile.tasks} == {
        "compare": [],
        "joins": [],
    }
    log = logging.getLogger("test")
    with pytest.raises(AirflowSkipException, match="no join's stream has completed a batch"):
        run_judge("joins_reconcile", {"run_id": "r1"}, log, run=jobs_here)
    settings = enriched_lakehouse(spark, tmp_path)
    passed = run_judge("joins_reconcile", {"run_id": "r1"}, log, run=jobs_here)
    assert passed["passed"] and passed["outputs"]["events_enriched"]["compared"] == 2
    runs = read_table(spark, table("dq.reconciliation_runs"), settings).collect()
    assert {(r["run_id"], r["view"], r["verdict"]) for r in runs} == {
        ("joins:r1", "events_enriched", "passed"),
        ("joins:r1", "revenue_by_segment", "passed"),
    }


def test_a_reset_run_rebuilds_the_enrichment_from_silver_under_a_checkpoint_of_its_own(
    spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tables an earlier checkpoint's query wrote (the stream would refuse to start on them):
    a run with action reset stops the stream, runs `jobs.enrich --reset` and starts it again,
    which enriches silver afresh as its own checkpoint's query."""
    from dags.support import enrichment_tasks
    from lakehouse.core.delta_io import append_new, read_table
    from lakehouse.core.frames import rows_frame
    from lakehouse.core.small_tables import table_rows
    from lakehouse.core.tables import table
    from lakehouse.joins.enrichment import ENRICHED, PROGRESS
    from lakehouse.joins.supervisor import EnrichmentSupervisor
    from tests.integration.under_load import wait_for

    settings = enriched_lakehouse(spark, tmp_path)
    earlier = {r["app_id"] for r in table_rows(settings, PROGRESS)}
    silver = table("silver.events")
    at = T0 + timedelta(minutes=10)
    rows = [
        {
            **dict.fromkeys(silver.spark_schema().fieldNames()),
            "event_id": e,
            "event_type": "purchase",
            "user_id": "u1",
            "product_id": "p1",
            "amount": Decimal("2.50"),
            "event_time": at,
            "event_date": at.date(),
            "arrived_late": False,
        }
        for e in ("e1", "e2")
    ]
    append_new(rows_frame(spark, rows, silver.spark_schema()), silver, settings)
    for name, value in {
        STATE_ENV: str(tmp_path / "state"),
        "TRIBUTARY_PROFILE": "local",
        "TRIBUTARY__STORAGE__ROOT": settings.storage.root,
        "TRIBUTARY__STORAGE__CHECKPOINTS": settings.storage.checkpoints,
    }.items():
        monkeypatch.setenv(name, value)
    get_settings.cache_clear()
    supervisor = EnrichmentSupervisor(get_settings())
    try:
        done = enrichment_tasks.supervise_enrichment("reset")
        assert done["running"], done
        assert done["outcome"].startswith(
            "enrichment stream reset: removed silver.events_enriched, speed.revenue_by_segment, "
            "ops.enrichment_pins, ops.enrichment_progress; started the enrichment stream again"
        ), done
        wait_for(lambda: table_rows(settings, PROGRESS), 300, "the reset stream's first batch")
    finally:
        supervisor.stop()
        get_settings.cache_clear()
    apps = {r["app_id"] for r in table_rows(settings, PROGRESS)}
    assert len(apps) == 1 and not apps & earlier, (apps, earlier)
    enriched = read_table(spark, ENRICHED, settings).collect()
    assert sorted(r["event_id"] for r in enriched) == ["e1", "e2"]
