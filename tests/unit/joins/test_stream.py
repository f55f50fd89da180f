"""The enrichment stream job on a local lakehouse: `python -m jobs.enrich --available-now`
(in this process) reads silver.events as a Delta stream, and a second run goes on from its
checkpoint, correcting what a dimension change since has changed, and the judge
(`jobs.enrich_reconcile`) finds it equal; without silver the stream refuses in one line and
the judge has nothing to compare."""

from __future__ import annotations

import shutil
from decimal import Decimal
from pathlib import Path

import pytest

from jobs.contract import Exit, read_result
from lakehouse.cdc.shop import PRODUCTS, USERS
from lakehouse.core.config import Settings
from lakehouse.core.delta_io import append_new, read_table
from lakehouse.core.frames import rows_frame
from lakehouse.core.locks import exclusive_writer
from lakehouse.core.small_tables import table_version
from lakehouse.core.tables import Table, table
from lakehouse.joins.corrections import latest_rows
from lakehouse.joins.enrichment import ENRICHED, PROGRESS
from lakehouse.joins.outputs import EnrichmentOutputs
from lakehouse.transforms.enrichment import combine_revenue
from tests.jobs_in_process import RunJob
from tests.unit.joins.histories import at, write_history

pytestmark = pytest.mark.slow  # make test-fast leaves it out (docs/testing.md)

SILVER = table("silver.events")


def append_silver(
    spark, settings: Settings, events: list[tuple[str, str, float]], target: Table = SILVER
) -> None:
    """(event_id, product_id, minute): purchases of user u1, as the speed layer appends them
    (to silver.events, or to a replay version's events)."""
    rows = [
        {
            "event_id": e,
            "event_type": "purchase",
            "user_id": "u1",
            "session_id": "s1",
            "page": "/checkout",
            "product_id": p,
            "amount": Decimal("3.00"),
            "event_time": at(m),
            "sent_at": at(m),
            "event_date": at(m).date(),
            "kafka_partition": 0,
            "kafka_offset": i,
            "kafka_timestamp": at(m),
            "ingested_at": at(m),
            "arrived_late": False,
        }
        for i, (e, p, m) in enumerate(events)
    ]
    append_new(rows_frame(spark, rows, target.spark_schema()), target, settings)


# User u1 and product p1 (a mug), each one version from minute 0 on.
U1 = ("u1", "new", "DE", at(0), at(0), None, True, False, 10, None)
MUG = ("p1", "Mug", "kitchen", Decimal("4.00"), at(0), at(0), None, True, False, 20, None)


def a_user_and_a_mug(spark, settings: Settings) -> None:
    """The history tables holding U1 and MUG alone."""
    write_history(spark, settings, USERS, [U1])
    write_history(spark, settings, PRODUCTS, [MUG])


def env_of(settings: Settings, tmp_path: Path) -> dict[str, str]:
    return {
        "TRIBUTARY_PROFILE": "local",
        "TRIBUTARY__STORAGE__ROOT": settings.storage.root,
        "TRIBUTARY__STORAGE__CHECKPOINTS": settings.storage.checkpoints,
        "TRIBUTARY_STATE": str(tmp_path / "state"),
    }


def categories(spark, settings: Settings) -> dict[str, str | None]:
    rows = latest_rows(read_table(spark, ENRICHED, settings)).collect()
    return {r["event_id"]: r["category"] for r in rows}


def test_two_runs_enrich_what_silver_holds_and_correct_what_changed_between(
    spark, local_settings: Settings, tmp_path: Path, run_job_here: RunJob
) -> None:
    env = env_of(local_settings, tmp_path)
    append_silver(spark, local_settings, [("e1", "p1", 10), ("e2", "p2", 20)])
    a_user_and_a_mug(spark, local_settings)

    first = run_job_here("jobs.enrich", "--available-now", **env)
    assert first.returncode == 0, first.stderr[-2000:]
    assert categories(spark, local_settings) == {"e1": "kitchen", "e2": None}

    rake = ("p2", "Rake", "garden", Decimal("9.00"), at(5), at(5), None, True, False, 30, None)
    write_history(spark, local_settings, PRODUCTS, [MUG, rake])
    append_silver(spark, local_settings, [("e3", "p2", 30)])
    second = run_job_here("jobs.enrich", "--available-now", **env)
    assert second.returncode == 0, second.stderr[-2000:]

    assert categories(spark, local_settings) == {"e1": "kitchen", "e2": "garden", "e3": "garden"}
    progress = read_table(spark, PROGRESS, local_settings).orderBy("batch_id").collect()
    assert [(r["events"], r["corrected"]) for r in progress] == [(2, 0), (1, 1)]
    assert len({r["app_id"] for r in progress}) == 1, "the second run went on from the first"

    judged = run_job_here("jobs.enrich_reconcile", **env)
    assert judged.returncode == 0, judged.stderr[-2000:]
    result = read_result("enrich_reconcile", judged.stdout.splitlines())
    assert result is not None and result["equal"] and result["batch_id"] == 1
    assert result["events"] == {"compared": 3, "differing": 0}
    assert_the_joins_judge_records_equal_then_a_difference(spark, local_settings, env, run_job_here)


def assert_the_joins_judge_records_equal_then_a_difference(
    spark, settings: Settings, env: dict[str, str], run_job_here: RunJob
) -> None:
    """jobs.joins_reconcile records the enrichment's two outputs under `joins:<run id>`;
    a wrong row in the stream's table fails it, and the rerun replaces the run's rows."""
    judged = run_job_here("jobs.joins_reconcile", "--run-id", "t1", **env)
    assert judged.returncode == Exit.OK, judged.stderr[-2000:]
    result = read_result("joins_reconcile", judged.stdout.splitlines())
    assert result is not None and result["passed"] and result["run_id"] == "joins:t1"
    assert result["outputs"]["events_enriched"]["compared"] == 3
    assert recorded(spark, settings) == {
        "events_enriched": "passed",
        "revenue_by_segment": "passed",
    }

    [e1] = [r for r in read_table(spark, ENRICHED, settings).collect() if r["event_id"] == "e1"]
    wrong = {**e1.asDict(), "category": "garden", "enriched_batch": 1, "corrected": True}
    append_new(rows_frame(spark, [wrong], ENRICHED.spark_schema()), ENRICHED, settings)
    judged = run_job_here("jobs.joins_reconcile", "--run-id", "t1", **env)
    assert judged.returncode == Exit.CHECKS_FAILED, judged.stderr[-2000:]
    assert "events_enriched: 1 of 3 events differ" in judged.stderr
    assert "event_id=e1" in judged.stderr and "Traceback" not in judged.stderr
    assert recorded(spark, settings) == {
        "events_enriched": "failed",
        "revenue_by_segment": "passed",
    }


def recorded(spark, settings: Settings) -> dict[str, str]:
    rows = read_table(spark, table("dq.reconciliation_runs"), settings)
    return {r["view"]: r["verdict"] for r in rows.where("run_id = 'joins:t1'").collect()}


def test_a_new_checkpoint_is_refused_until_the_tables_are_reset_then_enriches_afresh(
    spark, local_settings: Settings, tmp_path: Path, run_job_here: RunJob
) -> None:
    """With its checkpoint gone the stream would read silver from the start again and key its
    rows on batch ids that start over: the revenue counted twice. It refuses instead, writing
    nothing, until --reset (refused while the stream runs) removes its tables and checkpoint;
    then it enriches silver afresh, to the same rows and revenue."""
    env = env_of(local_settings, tmp_path)
    a_user_and_a_mug(spark, local_settings)
    append_silver(spark, local_settings, [("e1", "p1", 10), ("e2", "p1", 20)])
    outputs = EnrichmentOutputs.live()
    owned = (outputs.enriched, outputs.revenue, outputs.pins, outputs.progress)

    first = run_job_here("jobs.enrich", "--available-now", **env)
    assert first.returncode == Exit.OK, first.stderr[-2000:]
    enriched, revenue = categories(spark, local_settings), revenue_rows(spark, local_settings)
    assert enriched == {"e1": "kitchen", "e2": "kitchen"}
    assert [(r[-2], r[-1]) for r in revenue] == [(2, Decimal("6.00"))], revenue
    versions = {t.name: table_version(local_settings, t) for t in owned}

    shutil.rmtree(outputs.checkpoint(local_settings))
    refused = run_job_here("jobs.enrich", "--available-now", **env)
    assert refused.returncode == Exit.CANNOT_RUN, refused.stderr[-2000:]
    assert refused.stderr.startswith("enrichment stream: silver.events_enriched holds what ")
    assert "write its rows a second time" in refused.stderr
    assert "jobs.enrich --reset" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert {t.name: table_version(local_settings, t) for t in owned} == versions

    with exclusive_writer(local_settings, outputs.writer):
        busy = run_job_here("jobs.enrich", "--reset", **env)
    assert busy.returncode == Exit.CANNOT_RUN and "Traceback" not in busy.stderr, busy.stderr
    assert {t.name: table_version(local_settings, t) for t in owned} == versions

    reset = run_job_here("jobs.enrich", "--reset", **env)
    assert reset.returncode == Exit.OK, reset.stderr[-2000:]
    assert "==> enrichment stream reset: removed silver.events_enriched, " in reset.stdout
    assert all(table_version(local_settings, t) is None for t in owned)

    again = run_job_here("jobs.enrich", "--available-now", **env)
    assert again.returncode == Exit.OK, again.stderr[-2000:]
    assert categories(spark, local_settings) == enriched
    assert revenue_rows(spark, local_settings) == revenue


def revenue_rows(spark, settings: Settings) -> list[tuple]:
    """The revenue view as serving sums its partial rows."""
    rows = read_table(spark, EnrichmentOutputs.live().revenue, settings).drop("batch_id")
    return sorted(tuple(r) for r in combine_revenue(rows).collect())


def test_without_silver_events_it_refuses_in_one_line(
    local_settings: Settings, tmp_path: Path, run_job_here: RunJob
) -> None:
    env = env_of(local_settings, tmp_path)
    ran = run_job_here("jobs.enrich", "--available-now", **env)
    assert ran.returncode == Exit.CANNOT_RUN
    assert ran.stderr.startswith("enrichment stream: no silver.events at ")
    assert "run the speed layer first" in ran.stderr and "Traceback" not in ran.stderr


def test_before_a_first_batch_the_judges_answer_without_starting_spark(
    local_settings: Settings, tmp_path: Path, run_job_here: RunJob, spark_refused: None
) -> None:
    env = env_of(local_settings, tmp_path)
    judged = run_job_here("jobs.enrich_reconcile", **env)
    assert judged.returncode == Exit.NOTHING_TO_DO
    assert judged.stderr == (
        "enrich_reconcile: the enrichment stream has completed no batch yet: nothing compared\n"
    )
    judged = run_job_here("jobs.joins_reconcile", **env)
    assert judged.returncode == Exit.NOTHING_TO_DO
    assert judged.stderr == (
        "joins_reconcile: no join's stream has completed a batch yet (enrichment, "
        "enrichment_batch, stream_joins, commerce): "
        "nothing compared, nothing written\n"
    )
    asked = run_job_here("jobs.cli", "compare", "--joins", **env)
    assert asked.returncode == Exit.NOTHING_TO_DO
    assert asked.stderr.endswith("commerce): nothing to compare\n")
