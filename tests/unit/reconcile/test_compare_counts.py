"""compare_view on 1-minute counts: equal, explained by late events, unexplained, one-sided
keys, thresholds, open windows and scope."""

from __future__ import annotations

from typing import Any

from lakehouse.reconcile.compare import Missing, compare_view
from lakehouse.transforms.views import VIEWS
from tests.unit.reconcile.conftest import Events, at

COUNTS = VIEWS["event_counts_1m"]
EXACT: dict[str, float] = {}


def keyed(result: Any) -> dict[tuple[str, str], dict[str, Any]]:
    return {
        (r["window_start"].strftime("%H:%M"), r["event_type"]): r.asDict() for r in result.collect()
    }


def test_identical_sides_are_equal(events: Events) -> None:
    rows = [("10:00:05", "click", "u1"), ("10:00:09", "purchase", "u2", "/", "9.99")]
    left = events.view("event_counts_1m", *rows)
    right = events.view("event_counts_1m", *rows)
    got = keyed(compare_view(left, right, COUNTS, EXACT))
    assert {k: r["status"] for k, r in got.items()} == {
        ("10:00", "click"): "equal",
        ("10:00", "purchase"): "equal",
    }
    assert all(r["explanation"] is None and not r["beyond_threshold"] for r in got.values())
    assert got[("10:00", "purchase")]["diff_amount_sum"] == 0


def test_a_difference_equal_to_the_late_events_is_explained(events: Events) -> None:
    on_time = [("10:00:05", "click", "u1"), ("10:00:06", "purchase", "u1", "/", "1.00")]
    late = [("10:00:30", "purchase", "u2", "/", "2.50"), ("10:00:40", "click", "u3")]
    batch = events.view("event_counts_1m", *on_time, *late)
    speed = events.view("event_counts_1m", *on_time)
    got = keyed(
        compare_view(
            batch,
            speed,
            COUNTS,
            EXACT,
            right_missing=Missing(events(*late), "late events speed set aside"),
            names=("batch", "speed"),
        )
    )
    purchase = got[("10:00", "purchase")]
    assert purchase["status"] == "explained"
    assert (purchase["left_events"], purchase["right_events"], purchase["diff_events"]) == (2, 1, 1)
    assert str(purchase["diff_amount_sum"]) == "2.50"
    assert purchase["unexplained_events"] == 0 and purchase["unexplained_amount_sum"] == 0
    assert purchase["explanation"] == ("late events speed set aside: events +1, amount_sum +2.50")
    assert got[("10:00", "click")]["status"] == "explained"


def test_a_window_only_late_events_fill_is_explained_though_speed_lacks_it(
    events: Events,
) -> None:
    late = [("10:07:00", "click", "u9")]
    batch = events.view("event_counts_1m", *late)
    speed = events.view("event_counts_1m")
    got = keyed(
        compare_view(batch, speed, COUNTS, EXACT, right_missing=Missing(events(*late), "late"))
    )
    assert got[("10:07", "click")]["status"] == "explained"
    assert got[("10:07", "click")]["right_events"] is None


def test_a_difference_no_late_event_covers_is_unexplained_and_beyond_threshold(
    events: Events,
) -> None:
    batch = events.view("event_counts_1m", ("10:01:00", "click", "u1"), ("10:01:10", "click", "u2"))
    speed = events.view("event_counts_1m", ("10:01:00", "click", "u1"))
    late = events(("10:05:00", "click", "u4"))  # another window: explains nothing here
    got = keyed(
        compare_view(
            batch, speed, COUNTS, EXACT, right_missing=Missing(late, "late"), names=("b", "s")
        )
    )
    row = got[("10:01", "click")]
    assert row["status"] == "unexplained" and row["beyond_threshold"]
    assert row["unexplained_events"] == 1
    assert "not explained by missing events: events +1" in row["explanation"]
    # The late event's own window is in neither side: the speed's late events claim a window
    # the batch does not have at all.
    assert got[("10:05", "click")]["status"] == "unexplained"
    assert "only in missing events" in got[("10:05", "click")]["explanation"]


def test_keys_on_one_side_only_are_named(events: Events) -> None:
    batch = events.view("event_counts_1m", ("10:02:00", "click", "u1"))
    speed = events.view("event_counts_1m", ("10:03:00", "page_view", "u1"))
    got = keyed(compare_view(batch, speed, COUNTS, EXACT, names=("batch", "speed")))
    assert got[("10:02", "click")]["status"] == "unexplained"
    assert got[("10:02", "click")]["explanation"].startswith("only in batch")
    assert got[("10:03", "page_view")]["explanation"].startswith("only in speed")
    assert got[("10:03", "page_view")]["diff_events"] == -1


def test_thresholds_tolerate_small_unexplained_differences(events: Events) -> None:
    batch = events.view(
        "event_counts_1m",
        ("10:00:01", "purchase", "u1", "/", "10.00"),
        ("10:00:02", "purchase", "u2", "/", "0.01"),
    )
    speed = events.view("event_counts_1m", ("10:00:01", "purchase", "u1", "/", "10.00"))
    loose = compare_view(batch, speed, COUNTS, {"events": 1, "amount_sum": 0.05})
    strict_sum = compare_view(batch, speed, COUNTS, {"events": 1})
    [row] = loose.collect()
    assert row["status"] == "unexplained" and not row["beyond_threshold"]
    assert strict_sum.collect()[0]["beyond_threshold"]


def test_windows_not_final_on_both_sides_are_open_and_not_judged(events: Events) -> None:
    batch = events.view("event_counts_1m", ("10:00:00", "click", "u1"), ("10:05:00", "click", "u1"))
    speed = events.view("event_counts_1m", ("10:00:00", "click", "u1"))
    got = keyed(compare_view(batch, speed, COUNTS, EXACT, closed=[(at("09:00"), at("10:05"))]))
    assert got[("10:00", "click")]["status"] == "equal"
    assert got[("10:05", "click")]["status"] == "open"
    assert not got[("10:05", "click")]["beyond_threshold"]


def test_scope_leaves_other_windows_out_entirely(events: Events) -> None:
    batch = events.view("event_counts_1m", ("10:00:00", "click", "u1"), ("11:00:00", "click", "u1"))
    speed = events.view("event_counts_1m")
    late = Missing(events(("12:00:00", "click", "u2")), "late")
    got = keyed(
        compare_view(
            batch, speed, COUNTS, EXACT, right_missing=late, scope=[(at("10:00"), at("10:30"))]
        )
    )
    assert set(got) == {("10:00", "click")}


def test_events_both_sides_left_out_cancel(events: Events) -> None:
    """Replay vs live: both set the same event aside, or the batch had not read it either."""
    kept = [("10:00:00", "click", "u1")]
    late = [("10:00:20", "click", "u2")]
    left = events.view("event_counts_1m", *kept)
    right = events.view("event_counts_1m", *kept)
    got = keyed(
        compare_view(
            left,
            right,
            COUNTS,
            EXACT,
            left_missing=Missing(events(*late), "unread"),
            right_missing=Missing(events(*late), "late"),
        )
    )
    assert [r["status"] for r in got.values()] == ["equal"]
