"""compare_view on active-user sets (batch users = speed users U late users) and sessions
(explained by a late event of the user within the gap of either side's session)."""

from __future__ import annotations

from typing import Any

from lakehouse.reconcile.compare import Missing, compare_view
from lakehouse.transforms.views import VIEWS
from tests.unit.reconcile.conftest import Events

USERS = VIEWS["active_users_10m"]
SESSIONS = VIEWS["user_sessions"]


def window(result: Any, clock: str, page: str) -> dict[str, Any]:
    [row] = [
        r.asDict()
        for r in result.collect()
        if r["window_start"].strftime("%H:%M") == clock and r["page"] == page
    ]
    return row


def test_users_the_late_events_add_explain_a_bigger_batch_set(events: Events) -> None:
    on_time = [("10:00:10", "click", "u1", "/cart"), ("10:00:20", "click", "u2", "/cart")]
    late = [("10:00:30", "click", "u3", "/cart"), ("10:00:40", "click", "u1", "/cart")]
    batch = events.view("active_users_10m", *on_time, *late)
    speed = events.view("active_users_10m", *on_time)
    result = compare_view(batch, speed, USERS, {}, right_missing=Missing(events(*late), "late"))
    row = window(result, "10:00", "/cart")
    assert row["status"] == "explained"
    assert (row["left_active_users"], row["right_active_users"]) == (3, 2)
    assert row["unexplained_active_users"] == 0 and row["diff_events"] == 2
    assert {r["status"] for r in result.collect()} == {"explained"}


def test_a_user_no_late_event_brings_is_named(events: Events) -> None:
    batch = events.view(
        "active_users_10m", ("10:00:10", "click", "u1", "/"), ("10:00:20", "click", "u7", "/")
    )
    speed = events.view(
        "active_users_10m", ("10:00:10", "click", "u1", "/"), ("10:00:20", "click", "u8", "/")
    )
    result = compare_view(batch, speed, USERS, {}, names=("batch", "speed"))
    row = window(result, "10:00", "/")
    # Same size, same events, different people: still a difference.
    assert row["diff_active_users"] == 0 and row["diff_events"] == 0
    assert row["status"] == "unexplained" and row["unexplained_active_users"] == 2
    assert "users only in batch: u7" in row["explanation"]
    assert "users only in speed: u8" in row["explanation"]


def sessions_of(result: Any) -> dict[tuple[str, str], dict[str, Any]]:
    return {
        (r["user_id"], r["session_start"].strftime("%H:%M")): r.asDict() for r in result.collect()
    }


def test_a_session_a_late_event_extended_is_explained(events: Events) -> None:
    on_time = [("10:00", "click", "u1"), ("10:20", "click", "u1")]
    late = [("10:45", "purchase", "u1", "/", "5.00")]
    batch = events.view("user_sessions", *on_time, *late)
    speed = events.view("user_sessions", *on_time)
    got = sessions_of(
        compare_view(batch, speed, SESSIONS, {}, right_missing=Missing(events(*late), "late"))
    )
    row = got[("u1", "10:00")]
    assert row["status"] == "explained"
    assert (row["left_events"], row["right_events"]) == (3, 2)
    assert row["unexplained_events"] == 0
    assert "1 of the user's events within 30 min of the session are late" in row["explanation"]


def test_a_late_event_that_split_sessions_explains_both_sides(events: Events) -> None:
    """A late event bridging two speed sessions makes one batch session: three keys differ."""
    on_time = [("10:00", "click", "u1"), ("10:50", "click", "u1")]
    late = [("10:25", "click", "u1")]
    batch = events.view("user_sessions", *on_time, *late)  # one session 10:00-10:50
    speed = events.view("user_sessions", *on_time)  # 10:00 and 10:50
    got = sessions_of(
        compare_view(batch, speed, SESSIONS, {}, right_missing=Missing(events(*late), "late"))
    )
    assert {k: r["status"] for k, r in got.items()} == {
        ("u1", "10:00"): "explained",
        ("u1", "10:50"): "explained",
    }


def test_a_session_difference_without_a_nearby_late_event_is_unexplained(
    events: Events,
) -> None:
    batch = events.view("user_sessions", ("10:00", "click", "u1"), ("10:10", "click", "u1"))
    speed = events.view("user_sessions", ("10:00", "click", "u1"))
    far_late = events(("12:00", "click", "u1"), ("10:05", "click", "u2"))
    got = sessions_of(
        compare_view(batch, speed, SESSIONS, {}, right_missing=Missing(far_late, "late"))
    )
    row = got[("u1", "10:00")]
    assert row["status"] == "unexplained" and row["beyond_threshold"]
    assert row["unexplained_events"] == 1 and row["unexplained_duration_seconds"] == 600
    assert "no late within 30 min" in row["explanation"]


def test_equal_sessions_are_equal(events: Events) -> None:
    rows = [("10:00", "click", "u1"), ("10:10", "purchase", "u1", "/", "3.00")]
    result = compare_view(
        events.view("user_sessions", *rows), events.view("user_sessions", *rows), SESSIONS, {}
    )
    assert [r["status"] for r in result.collect()] == ["equal"]


def test_a_session_still_open_on_one_side_is_open_not_unexplained(events: Events) -> None:
    from pyspark.sql import functions as F

    from tests.unit.reconcile.conftest import at

    on_time = [("10:00", "click", "u1"), ("10:20", "click", "u1")]
    batch = events.view("user_sessions", *on_time, ("10:40", "click", "u1"))
    speed = events.view("user_sessions", *on_time)
    closed_until = at("10:10")  # the speed's watermark minus the gap
    got = sessions_of(
        compare_view(
            batch,
            speed,
            SESSIONS,
            {},
            closed=[(at("09:00"), closed_until)],
            right_open=F.col("session_end") >= F.lit(closed_until),
        )
    )
    # The speed's session (10:00-10:20) may still grow: the difference is not judged yet.
    assert got[("u1", "10:00")]["status"] == "open"
