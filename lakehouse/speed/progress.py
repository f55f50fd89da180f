"""The speed layer's health, judged from its progress table (ops.speed_progress).

Read with delta-rs, not Spark, so an Airflow task can look without starting a JVM. The rules
in `judge_health` are pure: rows (newest first), the clock and Kafka's end offsets in, a
verdict out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import pairwise
from typing import Any, Literal

from lakehouse.core.config import Settings
from lakehouse.core.delta_io import delta_rs_location
from lakehouse.core.tables import Table, table

PROGRESS = table("ops.speed_progress")
# Lag must grow across this many consecutive batches to count as a trend, not a burst.
LAG_TREND_BATCHES = 5
_MAP_COLUMNS = ("offsets", "kafka_lag", "step_seconds")

Status = Literal["healthy", "stale", "lagging", "slow", "starting"]
Remedy = Literal["restart", "none", "wait"]


@dataclass(frozen=True)
class Health:
    status: Status
    message: str  # one line, with the numbers behind the verdict
    remedy: Remedy
    records_waiting: int = 0  # in Kafka beyond the newest batch's offsets
    batch_id: int | None = None  # the newest batch's
    last_batch_at: datetime | None = None  # when the newest batch was committed


def latest_progress(
    settings: Settings,
    n: int = 10,
    progress: Table = PROGRESS,
    map_columns: tuple[str, ...] = _MAP_COLUMNS,
) -> list[dict[str, Any]]:
    """The newest `n` rows of a progress table (one row per micro-batch, with processed_at
    and batch_id), newest first, its `map_columns` as dicts; [] while it does not exist."""
    import pyarrow as pa
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    uri, options = delta_rs_location(settings, progress.path(settings))
    try:
        delta = DeltaTable(uri, storage_options=options)
    except TableNotFoundError:
        return []
    # One file per batch, so the table holds many small files: read only the newest ones,
    # chosen by their min/max statistics, never the whole table.
    cutoff = _newest_files_cutoff(pa.table(delta.get_add_actions(flatten=True)), n)
    pruning = None if cutoff is None else [("processed_at", ">=", cutoff)]
    rows = delta.to_pyarrow_dataset(file_pruning_predicate=pruning).to_table().to_pylist()
    rows.sort(key=lambda r: (r["processed_at"], r["batch_id"]), reverse=True)
    for row in rows[:n]:
        for column in map_columns:
            if row.get(column) is not None:
                row[column] = dict(row[column])
    return rows[:n]


def _newest_files_cutoff(actions: Any, n: int) -> datetime | None:
    """A processed_at that at least `n` rows reach, from the newest files' statistics."""
    names = actions.column_names
    if "max.processed_at" not in names or "min.processed_at" not in names:
        return None
    files = sorted(
        zip(
            actions["max.processed_at"].to_pylist(),
            actions["min.processed_at"].to_pylist(),
            actions["num_records"].to_pylist(),
            strict=True,
        ),
        key=lambda f: (f[0] is not None, f[0]),
        reverse=True,
    )
    covered, cutoff = 0, None
    for newest, oldest, records in files:
        if newest is None or oldest is None or records is None:
            return None  # no statistics: cannot prune safely
        cutoff = oldest if cutoff is None else min(cutoff, oldest)
        covered += records
        if covered >= n:
            return cutoff
    return None


def records_waiting(offsets: Mapping[int, int] | None, end_offsets: Mapping[int, int]) -> int:
    """Records in Kafka beyond the processed offsets (next offset to read, per partition)."""
    done = offsets or {}
    return sum(max(0, end - done.get(p, 0)) for p, end in end_offsets.items())


def judge_health(
    rows: Sequence[Mapping[str, Any]],
    now: datetime,
    end_offsets: Mapping[int, int],
    settings: Settings,
    running_since: datetime | None = None,
) -> Health:
    """Judge the stream from its newest progress rows (newest first).

    `running_since` is when the current stream process started, if known: a batch before it
    says nothing about this process, and a process gets stale_after_seconds to show its first.
    """
    speed = settings.speed
    newest = rows[0] if rows else None
    waiting = records_waiting(newest["offsets"] if newest else None, end_offsets)
    batch = newest["batch_id"] if newest else None

    def verdict(status: Status, message: str, remedy: Remedy) -> Health:
        at = _utc(newest["processed_at"]) if newest else None
        return Health(status, message, remedy, waiting, batch, at)

    last = last_sign_of_life(newest["processed_at"] if newest else None, running_since)
    idle = (now - last).total_seconds() if last else 0.0

    if waiting and last is not None and idle > speed.stale_after_seconds:
        what = f"no micro-batch for {idle:.0f} s" if newest else f"no micro-batch in {idle:.0f} s"
        return verdict(
            "stale",
            f"stale: {what} (limit {speed.stale_after_seconds} s) while {waiting:,} records "
            f"wait in Kafka; last batch: {_describe_batch(newest)}",
            "restart",
        )
    since_start = [
        r for r in rows if running_since is None or _utc(r["processed_at"]) >= _utc(running_since)
    ]
    if newest is None or (not since_start and waiting):
        up = f"stream up {idle:.0f} s, " if running_since else ""
        since = " since it started" if newest else ""
        backlog = f"{waiting:,} records wait in Kafka" if waiting else "Kafka holds nothing for it"
        return verdict("starting", f"starting: {up}no micro-batch yet{since}; {backlog}", "wait")

    lags = [r["total_lag"] for r in rows if r["app_id"] == newest["app_id"]][:LAG_TREND_BATCHES]
    growing = (
        len(lags) == LAG_TREND_BATCHES
        and None not in lags
        and all(a > b for a, b in pairwise(lags))
    )
    # A steady stream ends each batch with what arrived meanwhile, which the next batch
    # takes whole; a lag above the last batch's input is backlog the stream is not clearing.
    last_input = newest["input_rows"] or 0
    if growing and lags[0] > last_input:
        trend = " → ".join(f"{lag:,}" for lag in reversed(lags))
        return verdict(
            "lagging",
            f"lagging: Kafka lag grew over the last {LAG_TREND_BATCHES} batches "
            f"({trend} records, now above the last batch's {last_input:,} rows); "
            "the stream reads slower than producers write",
            "none",
        )

    freshness = newest["freshness_seconds"]
    lag = newest["total_lag"] if newest["total_lag"] is not None else waiting
    if freshness is not None and freshness > speed.freshness_slo_seconds and lag > 0:
        catching_up = bool(
            len(lags) > 1 and None not in lags and lags[0] < lags[-1]  # newest < oldest
        )
        return verdict(
            "slow",
            f"slow: freshness {freshness:,.0f} s is over the {speed.freshness_slo_seconds} s SLO "
            f"while {lag:,} records wait (batch {batch}"
            f"{', lag shrinking: catching up' if catching_up else ''})",
            "wait" if catching_up else "none",
        )

    return verdict(
        "healthy",
        f"healthy: last batch {_describe_batch(newest)}; {waiting:,} records wait in Kafka",
        "none",
    )


def _describe_batch(row: Mapping[str, Any] | None) -> str:
    if row is None:
        return "none yet"
    rate = row.get("rows_per_second")
    fresh = row.get("freshness_seconds")
    return (
        f"{row['batch_id']} at {_utc(row['processed_at']):%Y-%m-%d %H:%M:%S}Z, "
        f"{row.get('input_rows') or 0:,} rows"
        + (f" at {rate:,.1f} rows/s" if rate is not None else "")
        + f", lag {row['total_lag'] if row.get('total_lag') is not None else '?'}"
        + (f", freshness {fresh:,.1f} s" if fresh is not None else "")
    )


def last_sign_of_life(
    last_batch_at: datetime | None, running_since: datetime | None
) -> datetime | None:
    """When a stream last showed it lives, which its staleness clock runs from: its newest
    batch, or its process's start if later (None: neither is known)."""
    signs = [_utc(t) for t in (last_batch_at, running_since) if t is not None]
    return max(signs, default=None)


def stream_verdict(
    waiting: int,
    newest: tuple[int, datetime] | None,
    now: datetime,
    running_since: datetime | None,
    limit: float,
    stale: Callable[[float], str],
    starting: str,
    healthy: str,
) -> Health:
    """A supervised stream's verdict from what waits for it and its newest batch (id, when):
    stale (restart it) when nothing came for `limit` seconds since its last sign of life
    while something waits; starting (wait) when it has had no batch since its start while
    something waits; healthy otherwise. `stale` says it given the seconds idle."""
    batch, at = newest if newest else (None, None)
    last = last_sign_of_life(at, running_since)
    idle = (now - last).total_seconds() if last else 0.0
    if waiting and last is not None and idle > limit:
        return Health("stale", stale(idle), "restart", waiting, batch, at)
    started = running_since is not None and (at is None or at < _utc(running_since))
    if waiting and (at is None or started):
        return Health("starting", starting, "wait", waiting, batch, at)
    return Health("healthy", healthy, "none", waiting, batch, at)


def _utc(moment: datetime) -> datetime:
    # Delta timestamps are UTC instants; hand-built rows may come without a zone.
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment
