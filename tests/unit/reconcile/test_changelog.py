"""The CDC reconciliation among the others (lakehouse.reconcile.changelog): one row per
captured table and kind in dq.reconciliation_runs, a difference recorded as failed with its
first differing key and the batch the comparison is as of, an equal table recorded as passed;
a run's rows replaced by its rerun and never another reconciliation's; the summary names
what differs; the Tributary view lists the CDC rows among the reconciliations."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from lakehouse.core.delta_io import append_once, read_table, small_frame
from lakehouse.core.paths import STATE_ENV
from lakehouse.reconcile.changelog import RUNS
from lakehouse.reconcile.changelog_request import compare_changelog
from tests.captured_lakehouse import BATCH_ID, T0, build_users, spoil_segment
from tests.lakehouses import copied, local_lakehouse, moved_to

pytestmark = pytest.mark.slow  # make test-fast leaves it out (docs/testing.md)

STARTED = datetime(2026, 11, 25, 11, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def users_folder(spark, tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("captured")
    build_users(spark, folder)
    return folder


@pytest.fixture
def settings(users_folder, tmp_path, monkeypatch):
    """A copy of the lakehouse, and a state folder (the writer's lock) of the test's own."""
    monkeypatch.setenv(STATE_ENV, str(tmp_path / "state"))
    return moved_to(local_lakehouse(users_folder), copied(users_folder, tmp_path / "copy"))


def recorded(spark, settings) -> dict[str, dict]:
    rows = read_table(spark, RUNS, settings).where(F.col("right_source") == "cdc").collect()
    return {r["view"]: r.asDict() for r in rows}


def test_a_difference_is_recorded_as_failed_with_its_key_and_batch(spark, settings) -> None:
    spoil_segment(spark, settings, "u1", "lost")
    done = compare_changelog(spark, settings, "manual__1", STARTED)
    assert not done.passed
    rows = recorded(spark, settings)
    assert set(rows) == {
        f"{t}_{k}" for t in ("users", "products", "orders") for k in ("current", "history")
    } | {"user_orders"}
    view = rows["user_orders"]  # no orders captured: nothing to compare, and it says so
    assert (view["compared"], view["verdict"]) == (0, "passed")
    assert view["note"].endswith("; no changes captured yet")
    current = rows["users_current"]
    assert current["run_id"] == "cdc:manual__1" and current["left_source"] == "batch"
    assert (current["compared"], current["equal"], current["unexplained"]) == (2, 1, 1)
    assert current["beyond_threshold"] == 1 and current["open"] == 0
    assert current["verdict"] == "failed"
    assert current["verdict_reasons"] == ["users_current: 1 of 2 keys differ"]
    assert current["first_windows"] == [
        "user_id=u1: segment vip in the recompute, lost in the stream"
    ]
    assert current["note"].startswith(f"as of changelog batch {BATCH_ID} ")
    assert current["range_end"].replace(tzinfo=UTC) > T0
    history = rows["users_history"]
    assert (history["compared"], history["equal"], history["unexplained"]) == (3, 3, 0)
    assert history["verdict"] == "passed" and history["first_windows"] == []


def test_an_equal_table_is_recorded_as_passed(spark, settings) -> None:
    done = compare_changelog(spark, settings, "manual__2", STARTED, ["users"])
    assert done.passed
    rows = recorded(spark, settings)
    assert set(rows) == {"users_current", "users_history"}
    assert [(r["verdict"], r["unexplained"]) for r in rows.values()] == [("passed", 0)] * 2
    assert rows["users_current"]["equal"] == 2
    assert done.result()["failures"] == []


def test_a_rerun_replaces_its_rows_and_leaves_other_reconciliations_alone(spark, settings) -> None:
    other = {
        "run_id": "manual__3",
        "view": "event_counts_1m",
        "left_source": "batch",
        "right_source": "speed",
        "compared": 5,
        "verdict": "passed",
    }
    append_once(small_frame(spark, [other], RUNS), RUNS, settings, "test", 0)
    compare_changelog(spark, settings, "manual__3", STARTED, ["users"])
    spoil_segment(spark, settings, "u1", "lost")
    compare_changelog(spark, settings, "manual__3", STARTED, ["users"])
    rows = read_table(spark, RUNS, settings).collect()
    assert sorted((r["run_id"], r["view"], r["verdict"]) for r in rows) == [
        ("cdc:manual__3", "users_current", "failed"),
        ("cdc:manual__3", "users_history", "passed"),
        ("manual__3", "event_counts_1m", "passed"),
    ]


def test_without_record_nothing_is_written(spark, settings) -> None:
    from lakehouse.core.delta_io import table_exists

    compare_changelog(spark, settings, "manual__4", STARTED, record=False)
    assert not table_exists(spark, RUNS, settings)


def test_the_summary_names_the_table_and_kind_that_differ(spark, settings) -> None:
    spoil_segment(spark, settings, "u1", "lost")
    done = compare_changelog(spark, settings, "manual__5", STARTED, ["users"], record=False)
    lines = done.summary().splitlines()
    assert lines[0].startswith(
        f"CDC reconciliation cdc:manual__5: batch (recomputed from bronze) vs cdc (the changelog "
        f"stream), as of changelog batch {BATCH_ID} "
    )
    assert lines[2].split() == ["users_current", "2", "1", "1", "0"]
    assert lines[3].split() == ["users_history", "3", "3", "0", "0"]
    assert "  users_current user_id=u1: segment vip in the recompute, lost in the stream" in lines
    assert lines[-1].startswith("CDC reconciliation failed, as of changelog batch")
    assert lines[-1].endswith("users_current: 1 of 2 keys differ")
    assert done.result()["failures"] == [
        "users_current: 1 of 2 keys differ (first: user_id=u1: segment vip in the recompute, "
        "lost in the stream)"
    ]


def test_the_tributary_view_lists_the_cdc_rows_beside_the_views(spark, settings) -> None:
    from lakehouse.ops.overview import overview
    from lakehouse.ops.overview_page import render_overview

    spoil_segment(spark, settings, "u1", "lost")
    compare_changelog(spark, settings, "manual__6", STARTED, ["users"])
    listed = overview(settings, ask_kafka=False).reconciliations
    assert [(r["view"], r["left_source"], r["right_source"], r["verdict"]) for r in listed] == [
        ("users_current", "batch", "cdc", "failed"),
        ("users_history", "batch", "cdc", "passed"),
    ]
    links = {"promote": "p", "rollback": "r", "replay": "k", "dq": "dq/"}
    page = render_overview(overview(settings, ask_kafka=False), links)
    assert "users_current" in page and "batch vs cdc" in page
