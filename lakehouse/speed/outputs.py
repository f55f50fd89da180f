"""Where a speed-layer application writes: the live stream's tables (bronze, silver, the speed
views, its progress) or a replay version's own (`replay_<version>.*`, the same layout). The
same micro-batch code (lakehouse.speed.micro_batch) writes either."""

from __future__ import annotations

from dataclasses import dataclass, replace

from lakehouse.core.config import Settings
from lakehouse.core.tables import REPLAY, SPEED, Table, table

LIVE = SPEED


@dataclass(frozen=True)
class SpeedOutputs:
    """The tables one speed-layer application writes (the live ones, or a replay's)."""

    name: str
    raw: Table | None  # None: the records are not copied (a replay; live bronze has them)
    quarantine: Table
    silver: Table
    counts: Table
    active_users: Table
    sessions: Table
    late: Table
    progress: Table

    @classmethod
    def live(cls) -> SpeedOutputs:
        return cls(
            name=LIVE,
            raw=table("bronze.events_raw"),
            quarantine=table("bronze.quarantine"),
            silver=table("silver.events"),
            counts=table("speed.event_counts_1m"),
            active_users=table("speed.active_users_10m"),
            sessions=table("speed.user_sessions"),
            late=table("speed.late_events"),
            progress=table("ops.speed_progress"),
        )

    @classmethod
    def replay(cls, version: str) -> SpeedOutputs:
        """A replay's own tables, `replay_<version>.*`: same layout as the live ones."""
        stage = f"replay_{version}"

        def own(name: str, like: str) -> Table:
            # Everything else (partitioning, checkpoint interval) as the live table has it.
            return replace(table(like), name=f"{stage}.{name}", writer=REPLAY)

        return cls(
            name=stage,
            # The log is the replay's master dataset and live bronze already keeps every
            # record, so a version holds only what it derives: no copy of the log per replay.
            raw=None,
            quarantine=own("quarantine", "bronze.quarantine"),
            silver=own("events", "silver.events"),
            counts=own("event_counts_1m", "speed.event_counts_1m"),
            active_users=own("active_users_10m", "speed.active_users_10m"),
            sessions=own("user_sessions", "speed.user_sessions"),
            late=own("late_events", "speed.late_events"),
            progress=own("progress", "ops.speed_progress"),
        )

    def checkpoint(self, settings: Settings) -> str:
        """The streaming checkpoint of the query that writes these tables."""
        return self.progress.checkpoint(self.name, settings)

    def view_table(self, view_name: str) -> Table:
        """The table holding one of the views (lakehouse.transforms.views) in this output set."""
        return {
            "event_counts_1m": self.counts,
            "active_users_10m": self.active_users,
            "user_sessions": self.sessions,
        }[view_name]
