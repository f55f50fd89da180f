"""The Tributary view's page, from tables written by Spark as the jobs write them, read back
with delta-rs: the versions and what promoting each would change, the stream's charts, and
the latest reconciliation and quality runs linked to their reports."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from lakehouse.core.delta_io import append_once, small_frame
from lakehouse.ops.overview import QUALITY_RUNS, RECONCILIATIONS, overview
from lakehouse.ops.overview_page import render_overview
from lakehouse.replay.versions import record_version_event, switch_pointer
from lakehouse.speed.outputs import SpeedOutputs

LINKS = {"promote": "p", "rollback": "r", "replay": "k", "dq": "dq/"}
AT = datetime(2026, 3, 1, 12, tzinfo=UTC)


def test_the_page_shows_versions_health_and_results(spark, local_settings) -> None:
    settings = local_settings
    record_version_event(spark, settings, "v1", "planned")
    record_version_event(spark, settings, "v1", "caught_up", records=1234, rate=5.0)
    record_version_event(spark, settings, "v2", "planned")
    record_version_event(spark, settings, "v2", "caught_up", records=99, rate=5.0)
    switch_pointer(spark, settings, "promote", "v1", "v1")
    progress = SpeedOutputs.live().progress
    rows = [
        {
            "app_id": "a",
            "batch_id": b,
            "processed_at": AT + timedelta(seconds=10 * b),
            "freshness_seconds": 2.0 + b,
            "total_lag": 100 - b,
            "rows_per_second": 50.0,
            "new_events": 10,
            "late_events": b,
        }
        for b in range(3)
    ]
    append_once(small_frame(spark, rows, progress), progress, settings, "speed:t", 0)
    runs = [
        {
            "run_id": f"r{i}",
            "view": "event_counts_1m",
            "left_source": "batch",
            "right_source": "speed",
            "started_at": AT + timedelta(hours=i),
            "compared": 5 * i,
            "unexplained": 0,
            "verdict": verdict,
            "report_path": f"/s/dq/reports/r{i}.html",
        }
        for i, verdict in ((1, "failed"), (2, "passed"))
    ]
    small_frame(spark, runs, RECONCILIATIONS).write.format("delta").save(
        RECONCILIATIONS.path(settings)
    )
    checked = [
        {
            "run_id": "q",
            "table_name": "silver.events",
            "verdict": "passed",
            "checked_at": AT,
            "data_docs": "/s/dq/gx/data_docs/local_site/index.html",
        }
    ]
    small_frame(spark, checked, QUALITY_RUNS).write.format("delta").save(
        QUALITY_RUNS.path(settings)
    )

    view = overview(settings, ask_kafka=False)
    page = render_overview(view, LINKS)

    assert [v.version for v in view.listing.versions] == ["v1", "v2"]
    assert "active v1" in page and "1,234" in page
    assert "nothing is served from it in lambda mode" in page  # v2, in lambda mode
    assert "batch where the batch has run, speed after that (lambda mode)" in page
    assert [r["batch_id"] for r in view.progress] == [0, 1, 2], "oldest first"
    for measure in ("freshness_seconds", "total_lag", "rows_per_second", "late_share"):
        assert f'data-measure="{measure}"' in page
    # The newest reconciliation only, linked through the view.
    assert [r["run_id"] for r in view.reconciliations] == ["r2"]
    assert 'href="dq/reports/r2.html"' in page and "r1.html" not in page
    assert 'href="dq/gx/data_docs/local_site/index.html"' in page
    assert "Kafka cannot be reached" in page
    assert "<script" not in page and "http" not in page.replace(
        'xmlns="http://www.w3.org/2000/svg"', ""
    ), "offline: nothing fetched from elsewhere"


def test_what_promoting_says_for_each_state_of_a_version() -> None:
    from lakehouse.ops.overview import promotion_effect
    from lakehouse.replay.versions import VersionInfo

    def v(status: str) -> VersionInfo:
        return VersionInfo("v2", AT, "me", "earliest", status, 10, None, {}, False, None, False)

    assert "it was removed" in promotion_effect(v("removed"), "v1", "lambda")
    assert "it has not caught up (status failed)" in promotion_effect(v("failed"), "v1", "kappa")
    assert "serving reads it at once" in promotion_effect(v("caught_up"), "v1", "kappa")
    assert "nothing is served from it in lambda" in promotion_effect(v("caught_up"), "v1", "lambda")
    assert promotion_effect(v("caught_up"), "v2", "kappa").startswith("active: ")
