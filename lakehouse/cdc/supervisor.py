"""Start, stop and judge the changelog stream (jobs.cdc) as a detached process: the speed
layer's supervisor (lakehouse.speed.supervisor.StreamSupervisor) with the changelog job, its
stop file and its own pid, log, hold and lock files, judged from ops.cdc_progress.

Health: the stream is stale when its newest progress row (or its start, if later) is older
than speed.stale_after_seconds while its topics hold records it has not read. Empty micro-
batches write no row, so a quiet stream that has read everything stays healthy however old
its newest row.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lakehouse.core.config import Settings
from lakehouse.core.paths import cdc_stop_file
from lakehouse.core.times import as_utc
from lakehouse.speed.supervisor import StreamSupervisor, SupervisedStream

if TYPE_CHECKING:
    from lakehouse.speed.progress import Health

# Progress rows read per check: a topic partition missing from all of them had no record read
# in those batches (see changelog_lag).
LOOK_BACK_BATCHES = 200


def changelog_stream() -> SupervisedStream:
    return SupervisedStream("cdc", "jobs.cdc", cdc_stop_file(), "the changelog stream")


class ChangelogSupervisor(StreamSupervisor):
    """The changelog stream, judged from ops.cdc_progress and the changelog topics' ends."""

    def __init__(self, settings: Settings, run_dir: Path | None = None) -> None:
        super().__init__(settings, changelog_stream(), run_dir)

    def judge(self, running_since: datetime | None) -> Health:
        from lakehouse.cdc.changelog import PROGRESS
        from lakehouse.speed.progress import latest_progress

        rows = latest_progress(
            self.settings, LOOK_BACK_BATCHES, PROGRESS, map_columns=("offsets", "applied")
        )
        lag = changelog_lag(self.settings, rows, complete=len(rows) < LOOK_BACK_BATCHES)
        return judge_changelog(rows, datetime.now(UTC), lag, self.settings, running_since)


def read_offsets(rows: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """The next offset to read per "topic:partition", over the rows: a batch names only the
    partitions it read records from."""
    done: dict[str, int] = {}
    for row in rows:
        for key, offset in (row.get("offsets") or {}).items():
            done[key] = max(done.get(key, 0), int(offset))
    return done


def changelog_lag(
    settings: Settings,
    rows: Sequence[Mapping[str, Any]],
    complete: bool,
    topics: Sequence[str] | None = None,
) -> dict[str, int]:
    """Records each captured topic partition (or each of `topics`) holds beyond what the
    stream read, by the "topic:partition" offsets of its progress rows.

    A partition no row names: if `rows` are all the table holds, nothing of it was read (its
    lag is all it holds); else none of these batches read from it, so what it held before the
    oldest of them was read already, and its lag is what came after."""
    from lakehouse.core.kafka_offsets import end_offsets, log_bounds, offsets_at

    done = read_offsets(rows)
    oldest = min((as_utc(r["processed_at"]) for r in rows), default=None)
    lag = {}
    for topic in topics or [settings.cdc.topic(name) for name in settings.cdc.tables]:
        ends = end_offsets(settings, topic)  # {} until Debezium creates the topic
        unnamed = [p for p in ends if f"{topic}:{p}" not in done]
        since: dict[int, int] = {}
        if unnamed and (complete or oldest is None):
            since = {p: start for p, (start, _) in log_bounds(settings, topic).items()}
        elif unnamed and oldest is not None:
            since = offsets_at(settings, topic, oldest)
        for partition, end in ends.items():
            key = f"{topic}:{partition}"
            read = done[key] if key in done else since.get(partition, 0)
            lag[key] = max(0, end - read)
    return lag


def judge_changelog(
    rows: Sequence[Mapping[str, Any]],
    now: datetime,
    lag: Mapping[str, int],
    settings: Settings,
    running_since: datetime | None = None,
    stream: str = "changelog",
    describe: Callable[[Mapping[str, Any] | None], str] | None = None,
) -> Health:
    """The changelog stream's (or another `stream` over topics) verdict from its newest
    progress rows (newest first) and its lag per topic partition: stale (restart it),
    starting (no batch yet while records wait) or healthy."""
    from lakehouse.speed.progress import stream_verdict

    describe = describe or describe_batch
    waiting = sum(lag.values())
    newest = rows[0] if rows else None
    behind = ", ".join(f"{key} {n:,}" for key, n in sorted(lag.items()) if n) or "none"
    limit = settings.speed.stale_after_seconds
    return stream_verdict(
        waiting,
        (int(newest["batch_id"]), as_utc(newest["processed_at"])) if newest else None,
        now,
        running_since,
        limit,
        lambda idle: (
            f"stale: no {stream} batch for {idle:.0f} s (limit {limit} s) while "
            f"{waiting:,} records wait in the {stream} topics ({behind}); last batch: "
            f"{describe(newest)}"
        ),
        f"starting: no {stream} batch yet since the stream started; {waiting:,} records "
        f"wait ({behind})",
        f"healthy: last {stream} batch {describe(newest)}; {waiting:,} records wait ({behind})",
    )


def describe_batch(row: Mapping[str, Any] | None) -> str:
    if row is None:
        return "none yet"
    applied = row.get("applied") or {}
    changes = ", ".join(f"{t} {n}" for t, n in sorted(applied.items()) if n) or "no row changes"
    return (
        f"{row['batch_id']} at {as_utc(row['processed_at']):%Y-%m-%d %H:%M:%S}Z, "
        f"{row.get('records') or 0:,} records ({changes})"
    )
