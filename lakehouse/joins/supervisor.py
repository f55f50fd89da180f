"""Start, stop and judge the enrichment stream (jobs.enrich) as a detached process: the speed
layer's supervisor (lakehouse.speed.supervisor.StreamSupervisor) with the enrichment job, its
stop file and its own pid, log, hold and lock files, judged from ops.enrichment_progress.

Lag: commits of silver.events newer than the newest one a batch can have read (the version of
silver it pinned). The stream is stale when its newest progress row (or its start, if later)
is older than speed.stale_after_seconds while silver has such commits.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lakehouse.core.config import Settings
from lakehouse.core.paths import enrichment_stop_file
from lakehouse.core.times import as_utc
from lakehouse.speed.supervisor import StreamSupervisor, SupervisedStream

if TYPE_CHECKING:
    from lakehouse.speed.progress import Health


def enrichment_stream() -> SupervisedStream:
    return SupervisedStream(
        "enrich", "jobs.enrich", enrichment_stop_file(), "the enrichment stream", resettable=True
    )


class EnrichmentSupervisor(StreamSupervisor):
    """The enrichment stream, judged from ops.enrichment_progress and silver's version."""

    def __init__(self, settings: Settings, run_dir: Path | None = None) -> None:
        super().__init__(settings, enrichment_stream(), run_dir)

    def judge(self, running_since: datetime | None) -> Health:
        from lakehouse.core.small_tables import table_version
        from lakehouse.core.tables import table
        from lakehouse.joins.enrichment import PROGRESS
        from lakehouse.speed.progress import latest_progress

        rows = latest_progress(self.settings, 1, PROGRESS, map_columns=("versions",))
        silver = table_version(self.settings, table("silver.events"))
        return judge_enrichment(rows, datetime.now(UTC), silver, self.settings, running_since)


def judge_enrichment(
    rows: Sequence[Mapping[str, Any]],
    now: datetime,
    silver_version: int | None,
    settings: Settings,
    running_since: datetime | None = None,
) -> Health:
    """The enrichment stream's verdict from its newest progress rows (newest first) and the
    latest version of silver.events: stale (restart it), starting (no batch yet while silver
    has events) or healthy."""
    from lakehouse.joins.enrichment import SILVER_PIN
    from lakehouse.speed.progress import stream_verdict

    newest = rows[0] if rows else None
    read = (newest.get("versions") or {}).get(SILVER_PIN) if newest else None
    if silver_version is None:
        waiting = 0
    else:
        waiting = silver_version + 1 if read is None else max(0, silver_version - int(read))
    at = as_utc(newest["processed_at"]) if newest else None
    limit = settings.speed.stale_after_seconds
    last_batch = (
        f"{newest['batch_id']} at {at:%Y-%m-%d %H:%M:%S}Z, {newest['events']:,} events, "
        f"{newest['corrected']:,} corrected"
        if newest and at
        else "none yet"
    )
    return stream_verdict(
        waiting,
        (int(newest["batch_id"]), at) if newest and at else None,
        now,
        running_since,
        limit,
        lambda idle: (
            f"stale: no enrichment batch for {idle:.0f} s (limit {limit} s) while "
            f"silver.events has {waiting:,} newer commits; last batch: {last_batch}"
        ),
        f"starting: no enrichment batch yet since the stream started; silver.events has "
        f"{waiting:,} commits to read",
        f"healthy: last enrichment batch {last_batch}; silver.events has {waiting:,} newer commits",
    )
