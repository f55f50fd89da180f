from __future__ import annotations

import random
from datetime import datetime, timedelta
from decimal import Decimal

from lakehouse.core.frames import rows_frame
from lakehouse.transforms.sessions import events_as_intervals, merge_sessions, sessionize

SCHEMA = "user_id string, amount decimal(18,2), event_time timestamp"


def ts(text: str) -> datetime:
    return datetime.fromisoformat(f"2026-03-01T{text}")


def sessions_of(df):
    return sorted(
        (
            r["user_id"],
            r["session_start"].strftime("%H:%M"),
            r["session_end"].strftime("%H:%M"),
            r["events"],
            r["revenue"],
            r["duration_seconds"],
        )
        for r in df.collect()
    )


def test_thirty_minutes_of_silence_ends_a_session(spark) -> None:
    df = rows_frame(
        spark,
        [
            ("u1", None, ts("10:00:00")),
            ("u1", Decimal("9.99"), ts("10:29:59")),  # 29:59 later: same session
            ("u1", None, ts("10:59:59")),  # exactly 30:00 later: a new session
            ("u2", Decimal("1.00"), ts("10:10:00")),
        ],
        SCHEMA,
    )
    assert sessions_of(sessionize(df)) == [
        ("u1", "10:00", "10:29", 2, Decimal("9.99"), 1799),
        ("u1", "10:59", "10:59", 1, Decimal("0.00"), 0),
        ("u2", "10:10", "10:10", 1, Decimal("1.00"), 0),
    ]


def test_merging_known_sessions_with_new_events_equals_sessionizing_everything(spark) -> None:
    everything = rows_frame(
        spark,
        [("u1", None, ts(t)) for t in ("10:00", "10:20", "11:30", "11:50", "10:45", "11:10")],
        SCHEMA,
    )
    first_half = everything.where(
        "event_time < '2026-03-01 10:30' OR event_time >= '2026-03-01 11:30'"
    )
    second_half = everything.subtract(first_half)
    known = sessionize(first_half).select(
        "user_id", "session_start", "session_end", "events", "revenue"
    )
    incremental = merge_sessions(known.unionByName(events_as_intervals(second_half)))
    # 10:45 and 11:10 bridge the two known sessions into one.
    assert sessions_of(incremental) == sessions_of(sessionize(everything))
    assert [s[3] for s in sessions_of(incremental)] == [6]


def test_sessions_equal_a_plain_python_sessionization(spark) -> None:
    # Events summed per half-hour stretch first must not change any session: gaps of exactly
    # the limit, just under it, and sessions crossing stretch boundaries and midnight.
    rng = random.Random(7)
    start = datetime(2026, 3, 1, 22, 0)
    rows = []
    for user in ("u1", "u2", "u3"):
        at = start
        for _ in range(40):
            at += timedelta(seconds=rng.choice([1, 600, 1799, 1800, 1801, 3000]))
            rows.append((user, Decimal(rng.randint(0, 300)) / 100, at))
    expected = []
    for user in ("u1", "u2", "u3"):
        times = sorted((t, a) for u, a, t in rows if u == user)
        session = [times[0]]
        for t, a in times[1:]:
            if t - session[-1][0] >= timedelta(minutes=30):
                expected.append(_summary(user, session))
                session = []
            session.append((t, a))
        expected.append(_summary(user, session))
    got = sessionize(rows_frame(spark, rows, SCHEMA)).collect()
    assert sorted(tuple(r) for r in got) == sorted(expected)
    assert len(expected) > 40


def _summary(user, session):
    first, last = session[0][0], session[-1][0]
    revenue = sum((a for _, a in session), Decimal("0.00"))
    return (user, first, last, len(session), revenue, int((last - first).total_seconds()))
