"""The event-time views, described once for every layer that computes or compares them.

A view's rows are placed in time by one column (`time_column`): a row belongs to the batch
interval, the serving seam side and the reconciliation window that contain that instant.
The same functions compute a view in the speed layer, the batch layer and a replay.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lakehouse.transforms.partials import combine_active_users, combine_counts, combine_sessions
from lakehouse.transforms.sessions import sessionize
from lakehouse.transforms.windows import (
    SESSION_GAP_SECONDS,
    active_users_per_page,
    count_events_per_minute,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


class UnknownViewError(KeyError):
    def __str__(self) -> str:
        return f"unknown view {self.args[0]!r}; known views: {', '.join(VIEWS)}"


@dataclass(frozen=True)
class View:
    name: str
    time_column: str
    keys: tuple[str, ...]  # unique per row
    compute: Callable[[DataFrame], DataFrame]  # accepted events -> the view's rows
    # Rows of an interval [start, end) need events from [start - lookback, end + lookahead);
    # lookahead None: any later event may still belong to them (sessions grow forward).
    lookback_seconds: int
    lookahead_seconds: int | None
    # A row placed at t can change until the watermark passes t + settle.
    settle_seconds: int
    measures: tuple[str, ...]  # additive columns: speed + late = batch
    # Partial rows (a batch's rows, or any set of already combined rows) -> the view's rows,
    # as if computed from all their events at once (lakehouse.transforms.partials).
    combine: Callable[[DataFrame], DataFrame]

    @property
    def speed_table(self) -> str:
        return f"speed.{self.name}"

    @property
    def batch_table(self) -> str:
        return f"batch.{self.name}"


VIEWS: dict[str, View] = {
    v.name: v
    for v in (
        View(
            name="event_counts_1m",
            time_column="window_start",
            keys=("window_start", "event_type"),
            compute=count_events_per_minute,
            lookback_seconds=0,
            lookahead_seconds=60,
            settle_seconds=60,
            measures=("events", "amount_sum"),
            combine=combine_counts,
        ),
        View(
            name="active_users_10m",
            time_column="window_start",
            keys=("window_start", "page"),
            compute=active_users_per_page,
            lookback_seconds=0,
            lookahead_seconds=600,
            settle_seconds=600,
            measures=("events",),
            combine=combine_active_users,
        ),
        View(
            name="user_sessions",
            time_column="session_start",
            keys=("user_id", "session_start"),
            compute=sessionize,
            # An event opens a session only if the user was quiet for the whole gap before it.
            lookback_seconds=SESSION_GAP_SECONDS,
            lookahead_seconds=None,
            settle_seconds=SESSION_GAP_SECONDS,
            measures=("events", "revenue"),
            combine=combine_sessions,
        ),
    )
}


# The event columns the views' `compute` functions read (a test holds them to it): the batch
# layer keeps only these through its dedup shuffle and cache.
VIEW_INPUT_COLUMNS = ("event_time", "event_type", "user_id", "page", "amount")


def view(name: str) -> View:
    try:
        return VIEWS[name]
    except KeyError:
        raise UnknownViewError(name) from None
