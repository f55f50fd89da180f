"""Independent recomputation, in pandas, of what the speed layer must produce from a ledger.

Nothing here imports the code under test's transforms: windows and sessions are rebuilt from
the generator's ledger with plain pandas, so a shared bug cannot hide.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pandas as pd

GAP = pd.Timedelta(minutes=30)


def accepted(ledger: list[dict[str, Any]]) -> pd.DataFrame:
    rows = [e for e in ledger if e["expected"] == "silver"]
    df = pd.DataFrame(rows)
    df["event_time"] = pd.to_datetime(df["event_time"], utc=True).dt.tz_localize(None)
    df["cents"] = df["amount"].map(lambda a: 0 if a is None or pd.isna(a) else round(a * 100))
    return df


def minute_counts(events: pd.DataFrame) -> dict[tuple[pd.Timestamp, str], tuple[int, int]]:
    grouped = events.assign(w=events["event_time"].dt.floor("1min")).groupby(["w", "event_type"])
    return {
        k: (int(n), int(c))
        for k, n, c in zip(
            grouped.size().index, grouped.size(), grouped["cents"].sum(), strict=True
        )
    }


def sliding_users(events: pd.DataFrame) -> dict[tuple[pd.Timestamp, str], set[str]]:
    out: dict[tuple[pd.Timestamp, str], set[str]] = {}
    for t, page, user in zip(events["event_time"], events["page"], events["user_id"], strict=True):
        last_start = t.floor("1min")
        for k in range(10):  # the ten 10-minute windows, sliding by 1 minute, containing t
            out.setdefault((last_start - pd.Timedelta(minutes=k), page), set()).add(user)
    return out


def sessions(events: pd.DataFrame) -> set[tuple[str, pd.Timestamp, pd.Timestamp, int, int]]:
    found = set()
    for user, rows in events.sort_values("event_time").groupby("user_id"):
        start = end = None
        count = cents = 0
        for t, c in zip(rows["event_time"], rows["cents"], strict=True):
            if start is not None and t - end >= GAP:
                found.add((user, start, end, count, cents))
                start, count, cents = None, 0, 0
            start = t if start is None else start
            end, count, cents = t, count + 1, cents + c
        found.add((user, start, end, count, cents))
    return found


def to_cents(value: Decimal | None) -> int:
    return 0 if value is None else int(value * 100)
