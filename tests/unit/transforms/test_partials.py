"""A view's partial rows, from events split over micro-batches any way at all, combine into the
rows of the view computed from all the events at once; combined rows combine to themselves."""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from decimal import Decimal
from functools import reduce

import pytest

from lakehouse.core.frames import rows_frame
from lakehouse.transforms.views import VIEWS

SCHEMA = (
    "event_time timestamp, event_type string, user_id string, page string, amount decimal(18,2)"
)
START = datetime(2026, 3, 1, 10, 0)


def shop_events(seed: int) -> list[tuple]:
    """Three users' visits over three hours: bursts, pauses just under and over the session
    gap, the same minute and page from several users, purchases with and without amounts."""
    rng = random.Random(seed)
    events = []
    for user in ("u1", "u2", "u3"):
        at = START + timedelta(seconds=rng.randrange(600))
        for _ in range(25):
            at += timedelta(seconds=rng.choice((5, 40, 300, 29 * 60 + 59, 30 * 60, 45 * 60)))
            kind = rng.choice(("click", "view", "purchase"))
            amount = Decimal(rng.randrange(1, 5000)) / 100 if kind == "purchase" else None
            events.append((at, kind, user, rng.choice(("/", "/a", "/b")), amount))
    return events


def rows_of(df, keys: tuple[str, ...]) -> list[tuple]:
    return [tuple(r) for r in df.orderBy(*keys).collect()]


@pytest.mark.parametrize("name", sorted(VIEWS))
def test_partial_rows_from_any_split_combine_into_the_view_of_all_events(spark, name: str) -> None:
    view = VIEWS[name]
    seed = 1
    events = shop_events(seed)
    # Arrival order is not event-time order: an event that bridges two of a user's sessions,
    # or fills a window, may come in a later batch than both sides.
    rng = random.Random(seed)
    batches: list[list[tuple]] = [[] for _ in range(4)]
    for event in events:
        batches[rng.randrange(4)].append(event)
    partials = reduce(
        lambda a, b: a.unionByName(b),
        (view.compute(rows_frame(spark, batch, SCHEMA)) for batch in batches if batch),
    )
    whole = view.compute(rows_frame(spark, events, SCHEMA))
    combined = view.combine(partials)

    assert combined.columns == whole.columns
    assert partials.count() > whole.count(), "some keys had rows from several batches"
    assert rows_of(combined, view.keys) == rows_of(whole, view.keys)
    assert rows_of(view.combine(combined), view.keys) == rows_of(whole, view.keys)
