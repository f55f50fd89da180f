"""Start, stop and judge the stream joins (jobs.stream_joins) as a detached process: the speed
layer's supervisor (lakehouse.speed.supervisor.StreamSupervisor) with the joins' job, its stop
file and its own pid, log, hold and lock files, judged from ops.join_progress.

Lag: commits of the joins' source tables (silver.events, silver.order_events,
silver.payments) newer than the newest version a batch of the joins has read through (its
Delta source's end offset). The joins are stale when their newest progress row (or their
start, if later) is older than speed.stale_after_seconds while such commits wait.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lakehouse.core.config import Settings
from lakehouse.core.paths import stream_joins_stop_file
from lakehouse.core.times import as_utc
from lakehouse.speed.supervisor import StreamSupervisor, SupervisedStream

if TYPE_CHECKING:
    from lakehouse.speed.progress import Health

# Progress rows read per check: the two queries' newest batches are among them.
LOOK_BACK_ROWS = 20


def stream_joins_stream() -> SupervisedStream:
    return SupervisedStream(
        "stream_joins",
        "jobs.stream_joins",
        stream_joins_stop_file(),
        "the stream joins",
        resettable=True,
    )


class StreamJoinsSupervisor(StreamSupervisor):
    """The stream joins, judged from ops.join_progress and their source tables' versions."""

    def __init__(self, settings: Settings, run_dir: Path | None = None) -> None:
        super().__init__(settings, stream_joins_stream(), run_dir)

    def judge(self, running_since: datetime | None) -> Health:
        from lakehouse.core.small_tables import table_version
        from lakehouse.core.tables import table
        from lakehouse.joins.windowed import QUERIES
        from lakehouse.speed.progress import latest_progress

        rows = latest_progress(
            self.settings, LOOK_BACK_ROWS, table("ops.join_progress"), map_columns=()
        )
        sources = {s.source for q in QUERIES for s in (q.left, q.right)}
        latest = {t.path(self.settings): table_version(self.settings, t) for t in sources}
        return judge_stream_joins(rows, datetime.now(UTC), latest, self.settings, running_since)


def read_versions(rows: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Per source table path, the newest version a batch has read through (-1: none)."""
    done: dict[str, int] = {}
    for row in rows:
        for source in json.loads(row.get("sources") or "[]"):
            end = source.get("endOffset")
            if not isinstance(end, dict) or "reservoirVersion" not in end:
                continue
            path = str(source.get("description") or "").removeprefix("DeltaSource[")
            path = path.removesuffix("]").removeprefix("file:").rstrip("/")
            through = int(end["reservoirVersion"]) - (1 if int(end.get("index", -1)) == -1 else 0)
            done[path] = max(done.get(path, -1), through)
    return done


def judge_stream_joins(
    rows: Sequence[Mapping[str, Any]],
    now: datetime,
    latest: Mapping[str, int | None],
    settings: Settings,
    running_since: datetime | None = None,
) -> Health:
    """The joins' verdict from their newest progress rows (newest first) and the latest
    version of each source table (by path): stale (restart them), starting (no batch yet
    while sources have commits) or healthy."""
    from lakehouse.speed.progress import stream_verdict

    read = read_versions(rows)
    waiting = sum(
        max(0, version - read.get(path.removeprefix("file:").rstrip("/"), -1))
        for path, version in latest.items()
        if version is not None
    )
    newest = rows[0] if rows else None
    at = as_utc(newest["processed_at"]) if newest else None
    limit = settings.speed.stale_after_seconds
    last_batch = (
        f"{newest['query']} {newest['batch_id']} at {at:%Y-%m-%d %H:%M:%S}Z, watermark "
        f"{newest['watermark']}, {newest['state_rows'] or 0:,} state rows"
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
            f"stale: no stream joins batch for {idle:.0f} s (limit {limit} s) while "
            f"their sources have {waiting:,} newer commits; last batch: {last_batch}"
        ),
        f"starting: no stream joins batch yet since they started; their sources have "
        f"{waiting:,} commits to read",
        f"healthy: last stream joins batch {last_batch}; sources have {waiting:,} newer commits",
    )
