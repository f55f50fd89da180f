"""The tables one commerce application writes: the live ones, or a replay's own."""

from __future__ import annotations

from dataclasses import dataclass, replace

from lakehouse.core.config import Settings
from lakehouse.core.tables import COMMERCE, REPLAY, Table, table

LIVE = "commerce_stream"


@dataclass(frozen=True)
class CommerceOutputs:
    name: str  # the query's name; its checkpoint and its writes' marks go by it
    lock: str  # the writer lock held while writing them (lakehouse.core.locks)
    raw: Table | None  # None: the records are not copied (a replay; live bronze has them)
    quarantine: Table
    order_events: Table
    payments: Table
    state: Table
    rejected: Table
    progress: Table

    @classmethod
    def live(cls) -> CommerceOutputs:
        return cls(
            name=LIVE,
            lock=COMMERCE,
            raw=table("bronze.commerce_raw"),
            quarantine=table("bronze.commerce_quarantine"),
            order_events=table("silver.order_events"),
            payments=table("silver.payments"),
            state=table("silver.order_state"),
            rejected=table("silver.order_transitions_rejected"),
            progress=table("ops.commerce_progress"),
        )

    @classmethod
    def replay(cls, version: str) -> CommerceOutputs:
        """A replay's own tables, `replay_<version>.*` (beside the speed layer's replay of the
        same version: none of the names meet): the same schemas as the live ones."""
        stage = f"replay_{version}"

        def own(name: str, like: str) -> Table:
            return replace(table(like), name=f"{stage}.{name}", writer=REPLAY)

        return cls(
            name=f"{stage}_commerce",
            lock=f"{COMMERCE}_{stage}",
            # The log is the replay's source and live bronze already keeps every record.
            raw=None,
            quarantine=own("commerce_quarantine", "bronze.commerce_quarantine"),
            order_events=own("order_events", "silver.order_events"),
            payments=own("payments", "silver.payments"),
            state=own("order_state", "silver.order_state"),
            rejected=own("order_transitions_rejected", "silver.order_transitions_rejected"),
            progress=own("commerce_progress", "ops.commerce_progress"),
        )

    def checkpoint(self, settings: Settings) -> str:
        """The streaming checkpoint of the query that writes these tables."""
        return self.progress.checkpoint(self.name, settings)
