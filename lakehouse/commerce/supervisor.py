"""Start, stop and judge the commerce stream (jobs.commerce) as a detached process: the speed
layer's supervisor (lakehouse.speed.supervisor.StreamSupervisor) with the commerce job, its
stop file and its own pid, log, hold and lock files, judged from ops.commerce_progress as the
changelog stream is judged from its own (lakehouse.cdc.supervisor): stale when no batch came
for speed.stale_after_seconds while the payments and order-events topics hold records it has
not read.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lakehouse.cdc.supervisor import LOOK_BACK_BATCHES, changelog_lag, judge_changelog
from lakehouse.commerce.stream import commerce_topics
from lakehouse.core.config import Settings
from lakehouse.core.paths import commerce_stop_file
from lakehouse.core.times import as_utc
from lakehouse.speed.supervisor import StreamSupervisor, SupervisedStream

if TYPE_CHECKING:
    from lakehouse.speed.progress import Health


def commerce_stream() -> SupervisedStream:
    return SupervisedStream(
        "commerce", "jobs.commerce", commerce_stop_file(), "the commerce stream"
    )


class CommerceSupervisor(StreamSupervisor):
    """The commerce stream, judged from ops.commerce_progress and its topics' ends."""

    def __init__(self, settings: Settings, run_dir: Path | None = None) -> None:
        super().__init__(settings, commerce_stream(), run_dir)

    def judge(self, running_since: datetime | None) -> Health:
        from lakehouse.core.tables import table
        from lakehouse.speed.progress import latest_progress

        progress = table("ops.commerce_progress")
        rows = latest_progress(self.settings, LOOK_BACK_BATCHES, progress, map_columns=("offsets",))
        complete = len(rows) < LOOK_BACK_BATCHES
        lag = changelog_lag(self.settings, rows, complete, commerce_topics(self.settings))
        return judge_changelog(
            rows, datetime.now(UTC), lag, self.settings, running_since, "commerce", describe_batch
        )


def describe_batch(row: Mapping[str, Any] | None) -> str:
    if row is None:
        return "none yet"
    return (
        f"{row['batch_id']} at {as_utc(row['processed_at']):%Y-%m-%d %H:%M:%S}Z, "
        f"{row.get('records') or 0:,} records ({row.get('order_events') or 0:,} order events: "
        f"{row.get('applied') or 0:,} applied, {row.get('rejected') or 0:,} rejected; "
        f"{row.get('payments') or 0:,} payments)"
    )
