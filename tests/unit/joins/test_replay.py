"""A replay version's enrichment (`python -m jobs.enrich_replay`, in this process): the
version's own silver events enriched by the stream's code into its own tables. Enriched once
at the final history, it equals the live stream that enriched the same events in two batches
and corrected them when a product arrived between; its judge passes; a version that was never
replayed, or a bad name, is refused in one line, by jobs.replay_joins too."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from jobs.contract import Exit, read_result
from lakehouse.cdc.shop import PRODUCTS
from lakehouse.core.config import Settings
from lakehouse.core.delta_io import append_new, read_table, small_frame
from lakehouse.core.small_tables import table_rows
from lakehouse.core.times import to_micros
from lakehouse.joins.corrections import latest_rows
from lakehouse.joins.enrichment import ROW_COLUMNS
from lakehouse.joins.outputs import EnrichmentOutputs
from lakehouse.replay.versions import switch_pointer, table_versions
from lakehouse.serving.serve import serve
from lakehouse.speed.outputs import SpeedOutputs
from lakehouse.transforms.enrichment import combine_revenue
from tests.jobs_in_process import RunJob
from tests.unit.joins.test_stream import (
    MUG,
    a_user_and_a_mug,
    append_silver,
    at,
    env_of,
    write_history,
)

pytestmark = pytest.mark.slow  # make test-fast leaves it out (docs/testing.md)

V1 = EnrichmentOutputs.replay("v1")


def test_a_replay_enriched_at_the_final_history_equals_the_corrected_live_stream(
    spark, local_settings: Settings, tmp_path: Path, run_job_here: RunJob
) -> None:
    env = env_of(local_settings, tmp_path)
    a_user_and_a_mug(spark, local_settings)
    first, second = [("e1", "p1", 10), ("e2", "p2", 20)], [("e3", "p2", 30)]
    append_silver(spark, local_settings, first)
    assert run_job_here("jobs.enrich", "--available-now", **env).returncode == 0
    rake = ("p2", "Rake", "garden", Decimal("9.00"), at(5), at(5), None, True, False, 30, None)
    write_history(spark, local_settings, PRODUCTS, [MUG, rake])
    append_silver(spark, local_settings, second)
    assert run_job_here("jobs.enrich", "--available-now", **env).returncode == 0

    # The replay's silver: the same events, as `jobs.replay v1` writes them.
    append_silver(spark, local_settings, first + second, target=V1.events)
    replayed = run_job_here("jobs.enrich_replay", "v1", **env)
    assert replayed.returncode == Exit.OK, replayed.stderr[-2000:]
    result = read_result("enrich_replay", replayed.stdout.splitlines())
    assert result is not None and result["equal"] and result["batch_id"] == 0
    assert result["events"] == {"compared": 3, "differing": 0}

    live = EnrichmentOutputs.live()
    assert rows_of(spark, local_settings, V1) == rows_of(spark, local_settings, live)
    assert windows_of(spark, local_settings, V1) == windows_of(spark, local_settings, live)
    assert read_table(spark, V1.enriched, local_settings).where(F.col("corrected")).count() == 0


def test_kappa_serving_reads_the_active_version_s_revenue_as_far_as_its_last_passed_check(
    spark, local_settings: Settings, tmp_path: Path, run_job_here: RunJob
) -> None:
    """Hour 10:00 from the version (its watermark an hour and a quarter on), 11:00 from the
    live stream; when the version's pins cover events no passed check had read, the live
    stream serves it all, until the version's enrichment has run and been judged again."""
    env = env_of(local_settings, tmp_path)
    a_user_and_a_mug(spark, local_settings)
    append_silver(spark, local_settings, [("e1", "p1", 10), ("e2", "p1", 70)])
    assert run_job_here("jobs.enrich", "--available-now", **env).returncode == Exit.OK
    # The version holds an event the live stream does not (it found it late, say).
    append_silver(spark, local_settings, [("e1", "p1", 10), ("e9", "p1", 30)], target=V1.events)
    assert run_job_here("jobs.enrich_replay", "v1", **env).returncode == Exit.OK
    progress = SpeedOutputs.replay("v1").progress
    watermark = {"app_id": "replay", "batch_id": 0, "watermark_micros": to_micros(at(75))}
    append_new(small_frame(spark, [watermark], progress), progress, local_settings)

    def pin_and_serve(action: str) -> set[tuple]:
        pins = table_versions(local_settings, "v1")
        switch_pointer(spark, local_settings, action, "v1", "v1", pins=pins)
        served, _ = serve(spark, local_settings, "revenue_by_segment", mode="kappa")
        return {(r["window_start"].hour, r["purchases"], r["source"]) for r in served.collect()}

    assert pin_and_serve("promote") == {(10, 2, "replay_v1"), (11, 1, "speed")}
    # An extension's events, pinned before the version's enrichment has read them.
    append_silver(spark, local_settings, [("e8", "p1", 40)], target=V1.events)
    assert pin_and_serve("advance") == {(10, 1, "speed"), (11, 1, "speed")}
    assert run_job_here("jobs.enrich_replay", "v1", **env).returncode == Exit.OK
    served, _ = serve(spark, local_settings, "revenue_by_segment", mode="kappa")
    rows = {(r["window_start"].hour, r["purchases"], r["source"]) for r in served.collect()}
    assert rows == {(10, 3, "replay_v1"), (11, 1, "speed")}
    checks = table_rows(local_settings, V1.checks)
    assert sorted((c["batch_id"], c["equal"]) for c in checks) == [(0, True), (1, True)]


@pytest.mark.parametrize("job", ["enrich_replay", "replay_joins"])
def test_a_version_never_replayed_or_a_bad_name_is_refused_in_one_line(
    local_settings: Settings, tmp_path: Path, run_job_here: RunJob, job: str
) -> None:
    """The version's enrichment and its windowed joins and commerce replay refuse alike."""
    env = env_of(local_settings, tmp_path)
    missing = run_job_here(f"jobs.{job}", "v9", **env)
    assert missing.returncode == Exit.CANNOT_RUN
    assert missing.stderr.startswith(f"{job}: no replay_v9.events at ")
    assert "replay v9 first (jobs.replay)" in missing.stderr and "Traceback" not in missing.stderr
    bad = run_job_here(f"jobs.{job}", "V-9", **env)
    assert bad.returncode == Exit.BAD_REQUEST and "not a simple identifier" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1, bad.stderr


def rows_of(spark, settings: Settings, outputs: EnrichmentOutputs) -> list[tuple]:
    rows = latest_rows(read_table(spark, outputs.enriched, settings)).select(*ROW_COLUMNS)
    return sorted(tuple(r) for r in rows.collect())


def windows_of(spark, settings: Settings, outputs: EnrichmentOutputs) -> list[tuple]:
    partials = read_table(spark, outputs.revenue, settings).drop("batch_id")
    return sorted(tuple(r) for r in combine_revenue(partials).collect())
