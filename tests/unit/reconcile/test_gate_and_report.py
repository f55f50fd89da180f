"""The gate's verdict, the terminal summary and the HTML report, from results made in code."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from lakehouse.reconcile.gate import gate, gate_views
from lakehouse.reconcile.report import render_report
from lakehouse.reconcile.run import (
    Reconciliation,
    SeriesPoint,
    ViewComparison,
    bucket_seconds,
    intersect,
)
from lakehouse.reconcile.summary import summary_text
from tests.unit.reconcile.conftest import at


def counts(
    equal: int = 0, explained: int = 0, unexplained: int = 0, beyond: int = 0, open_: int = 0
):
    return {
        "equal": equal,
        "explained": explained,
        "unexplained": unexplained,
        "open": open_,
        "beyond_threshold": beyond,
    }


def bad_window(clock: str, kind: str = "click", beyond: bool = True) -> dict[str, Any]:
    return {
        "window_start": at(clock),
        "event_type": kind,
        "left_events": 5,
        "right_events": 3,
        "diff_events": 2,
        "unexplained_events": 2,
        "left_amount_sum": 0,
        "right_amount_sum": 0,
        "diff_amount_sum": 0,
        "unexplained_amount_sum": 0,
        "status": "unexplained",
        "beyond_threshold": beyond,
        "explanation": "not explained by missing events: events +2, amount_sum 0",
    }


def view_result(**kwargs: Any) -> ViewComparison:
    base: dict[str, Any] = {
        "view": "event_counts_1m",
        "keys": ("window_start", "event_type"),
        "time_column": "window_start",
        "metrics": ("events", "amount_sum"),
        "counts": counts(equal=10),
    }
    return ViewComparison(**(base | kwargs))


def run_of(*views: ViewComparison, allowed: int = 0) -> Reconciliation:
    return Reconciliation(
        run_id="manual__2026-03-01T12:00:00+00:00",
        left="batch",
        right="speed",
        started_at=at("12:00"),
        scope=(at("10:00"), None),
        ranges=[(at("10:00"), at("23:59"))],
        thresholds={"events": 0.0},
        max_unexplained_windows=allowed,
        views=list(views),
    )


def test_the_gate_passes_when_nothing_is_beyond_threshold() -> None:
    verdict = gate(run_of(view_result(counts=counts(equal=5, explained=2, unexplained=1))))
    assert verdict.passed and verdict.reasons == [] and verdict.first_windows == []


def test_the_gate_fails_with_the_count_and_the_first_windows() -> None:
    rows = [bad_window(f"10:0{k}") for k in range(7)]
    v = view_result(counts=counts(equal=3, unexplained=7, beyond=7), unexplained=rows)
    verdict = gate(run_of(v))
    assert not verdict.passed and verdict.beyond_threshold == 7
    assert (
        "7 window(s) with an unexplained difference beyond threshold (allowed 0)"
        in (verdict.reasons[0])
    )
    assert len(verdict.first_windows) == 5
    assert verdict.first_windows[0].startswith(
        "event_counts_1m 2026-03-01T10:00:00Z event_type=click"
    )
    assert "reconciliation gate failed" in verdict.message()


def test_the_gate_allows_as_many_windows_as_configured() -> None:
    v = view_result(counts=counts(unexplained=2, beyond=2), unexplained=[bad_window("10:00")] * 2)
    assert gate(run_of(v, allowed=2)).passed
    assert not gate(run_of(v, allowed=1)).passed


def test_a_promotion_gate_refuses_when_nothing_was_compared() -> None:
    nothing = view_result(counts=counts(open_=4), note="nothing final on both sides in the range")
    assert gate_views([nothing], 0).passed
    refused = gate_views([nothing], 0, require_compared=True)
    assert not refused.passed and "nothing was compared" in refused.reasons[0]


def test_ranges_intersect_and_charts_stay_small() -> None:
    a = [(at("10:00"), at("11:00")), (at("12:00"), at("13:00"))]
    b = [(at("10:30"), at("12:30"))]
    assert intersect(a, b) == [(at("10:30"), at("11:00")), (at("12:00"), at("12:30"))]
    assert intersect(a, []) == []
    assert bucket_seconds(at("10:00"), at("11:00")) == 60
    assert bucket_seconds(at("00:00"), at("00:00") + timedelta(days=30)) % 60 == 0
    assert (
        timedelta(days=30).total_seconds()
        / bucket_seconds(at("00:00"), at("00:00") + timedelta(days=30))
    ) <= 400


def test_summary_text_names_the_counts_and_the_first_windows() -> None:
    v = view_result(
        counts=counts(equal=3, unexplained=1, beyond=1, open_=2), unexplained=[bad_window("10:04")]
    )
    run = run_of(v)
    text = summary_text(run, gate(run))
    assert "batch vs speed" in text and "[2026-03-01T10:00:00Z, ...)" in text
    assert "event_counts_1m" in text and "2026-03-01T10:04:00Z event_type=click" in text
    assert "reconciliation gate failed" in text


def test_the_report_has_the_summary_the_unexplained_first_and_a_chart() -> None:
    series = [
        SeriesPoint(at(f"10:0{k}"), 10.0 + k, 10.0 + k - (k == 4), int(k == 4)) for k in range(8)
    ]
    v = view_result(
        counts=counts(equal=7, explained=1, unexplained=1, beyond=1),
        unexplained=[bad_window("10:04")],
        explained=[
            bad_window("10:05", beyond=False) | {"status": "explained", "explanation": "late <b>"}
        ],
        series=series,
    )
    html = render_report(run_of(v), gate(run_of(v)))
    assert html.index('id="unexplained"') < html.index("<svg") < html.index('id="explained"')
    assert 'id="summary"' in html and 'class="verdict failed"' in html
    assert html.count('class="unexplained"') == 1  # one marked point on the chart
    assert "series-left" in html and "series-right" in html
    assert "late &lt;b&gt;" in html  # text from the data is escaped
    assert "http" not in html.replace("http://www.w3.org/2000/svg", "")  # no CDN, no fetch


def test_the_chart_breaks_its_lines_at_empty_buckets_and_says_what_it_counts() -> None:
    """Sessions start sparsely: a bucket with nothing compared is a gap, not a line drawn
    across it as if both sides had moved; a point alone is a dot; the edge labels stay
    inside the chart."""
    import re

    minutes = [0, 1, 2, 7, 8, 30]  # runs: 10:00-10:02, 10:07-10:08, 10:30 alone
    series = [SeriesPoint(at(f"10:{m:02}"), 5.0, 5.0, 0) for m in minutes]
    v = view_result(
        view="user_sessions",
        keys=("user_id", "session_start"),
        time_column="session_start",
        counts=counts(equal=6),
        series=series,
    )
    html = render_report(run_of(v), gate(run_of(v)))
    assert html.count('<polyline class="series-left"') == 2
    assert html.count('<circle class="series-left"') == 1
    assert html.count('<polyline class="series-right"') == 2
    assert "events of the user_sessions rows, per 1 min of session_start" in html
    anchors = re.findall(r'text-anchor="(\w+)" font-size="11">\d\d-\d\d \d\d:\d\d<', html)
    assert anchors[0] == "start" and anchors[-1] == "end" and set(anchors[1:-1]) == {"middle"}
