"""Replay versions and the serving pointer.

ops.replay_versions (written by jobs/replay.py) is each version's life as events: planned
(offset ranges, retention gaps), caught_up (records, rate, watermark), failed; and for each
extension over the log written since (`jobs.replay --extend`), extending then extended.
ops.serving_pointer (written by jobs/versions.py) is one row per promotion, rollback or
removal; its newest row names the active version. A switch is one Delta commit, so a reader
sees the old or the new version, never a mix. "live" is the speed layer's own tables.

Serving reads a version as it was when its reconciliation gate last passed, not as it is now:
a promotion records the Delta version of each table serving reads (its pins), and an
extension of the active version writes new table versions that serving sees only once their
own gate passed and an "advance" row recorded new pins (check it, then switch).
"""

from __future__ import annotations

import getpass
import os
import socket
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from lakehouse.core.config import Settings
from lakehouse.core.delta_io import append_once, small_frame
from lakehouse.core.small_tables import table_rows, table_version
from lakehouse.core.tables import Table, table
from lakehouse.core.times import from_micros, to_micros
from lakehouse.replay.plan import ReplayPlan
from lakehouse.speed.outputs import SpeedOutputs
from lakehouse.transforms.views import VIEWS

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

LIVE = "live"
VERSIONS = table("ops.replay_versions")
POINTER = table("ops.serving_pointer")

# Pointer actions that record the pins serving reads a version at: the gate passed there.
PINNING = ("promote", "advance")


class VersionError(Exception):
    """A promotion, rollback or removal that cannot be done; the message says why."""


def actor() -> str:
    """Who acts: the Airflow run when there is one, else user@host."""
    run = os.environ.get("AIRFLOW_CTX_DAG_RUN_ID")
    if run:
        return f"airflow:{os.environ.get('AIRFLOW_CTX_DAG_ID', '?')}/{run}"
    return f"{getpass.getuser()}@{socket.gethostname()}"


@dataclass(frozen=True)
class VersionInfo:
    version: str
    created_at: datetime
    by: str
    start: str
    status: str  # running, caught_up, failed, extending, removed
    records: int | None  # read from the log so far, extensions included
    rate: float | None  # of its last run
    gaps: dict[int, int]
    forced: bool
    watermark: datetime | None
    active: bool
    end_offsets: dict[int, int] = field(default_factory=dict)  # where its last run ended
    topic: str | None = None
    extensions: int = 0  # extensions finished


# --- version events (writer: jobs/replay.py) -----------------------------------------------


def record_version_event(
    spark: SparkSession,
    settings: Settings,
    version: str,
    event: str,
    plan: ReplayPlan | None = None,
    sequence: int = 0,
    **values: Any,
) -> None:
    """Append one event, once: a resumed run does not repeat it. `sequence` tells apart the
    events of one kind a version has several of (its extensions: 1, 2, ...)."""
    row: dict[str, Any] = {
        "version": version,
        "event": event,
        "at": datetime.now(UTC),
        "by": actor(),
        "topic": plan.topic if plan else None,
        "start": plan.start.describe() if plan else None,
        "start_offsets": plan.start_offsets if plan else None,
        "end_offsets": plan.end_offsets if plan else None,
        "gaps": plan.gaps if plan else None,
        "forced": plan.forced if plan else None,
        **values,
    }
    df = small_frame(spark, [row], VERSIONS)
    append_once(df, VERSIONS, settings, f"replay:{version}:{event}", sequence)


def version_events(settings: Settings) -> list[dict[str, Any]]:
    return _by_time(table_rows(settings, VERSIONS))


# --- the pointer (writer: jobs/versions.py) ------------------------------------------------


def pointer_history(settings: Settings) -> list[dict[str, Any]]:
    return _by_time(table_rows(settings, POINTER))


def _by_time(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows oldest first, `at` given as `at_micros`."""
    for row in rows:
        row["at_micros"] = to_micros(row.pop("at"))
    return sorted(rows, key=lambda r: r["at_micros"])


def active_version(settings: Settings) -> str:
    return served_version(settings)[0]


def outputs_of(version: str) -> SpeedOutputs:
    return SpeedOutputs.live() if version == LIVE else SpeedOutputs.replay(version)


def list_versions(settings: Settings) -> list[VersionInfo]:
    active = active_version(settings)
    removed = {r["version"] for r in pointer_history(settings) if r["action"] == "remove"}
    found: dict[str, list[dict[str, Any]]] = {}
    for e in version_events(settings):
        found.setdefault(e["version"], []).append(e)
    infos = []
    for version, events in found.items():
        kinds = [e["event"] for e in events]
        planned = next((e for e in events if e["event"] == "planned"), events[0])
        # The newest run that reached the end of the log: the replay or its last extension.
        done = next((e for e in reversed(events) if e["event"] in ("caught_up", "extended")), None)
        extensions = kinds.count("extended")
        status = (
            "removed"
            if version in removed
            else "extending"
            if kinds.count("extending") > extensions
            else "caught_up"
            if done
            else "failed"
            if "failed" in kinds
            else "running"
        )
        wm = done.get("watermark_micros") if done else None
        infos.append(
            VersionInfo(
                version=version,
                created_at=from_micros(planned["at_micros"]),
                by=planned["by"],
                start=planned["start"] or "?",
                status=status,
                records=done.get("records") if done else None,
                rate=done.get("rate") if done else None,
                gaps=dict(planned.get("gaps") or {}),
                forced=bool(planned.get("forced")),
                watermark=from_micros(wm) if wm is not None else None,
                active=version == active,
                end_offsets=dict((done or planned).get("end_offsets") or {}),
                extensions=extensions,
                topic=planned.get("topic"),
            )
        )
    return sorted(infos, key=lambda i: i.created_at)


def next_version(settings: Settings) -> str:
    numbers = [
        int(e["version"][1:])
        for e in version_events(settings)
        if e["version"][:1] == "v" and e["version"][1:].isdigit()
    ]
    return f"v{max(numbers, default=0) + 1}"


def served_tables(version: str) -> dict[str, Table]:
    """What serving reads of a version, by pin name: its progress (the watermark that bounds
    what it covers) and each view's table."""
    outputs = outputs_of(version)
    return {"progress": outputs.progress, **{v: outputs.view_table(v) for v in VIEWS}}


# A pin serving does not read at: how far the version's events went when its gate passed. Its
# revenue view is served from its enrichment only once a check of that had read them all
# (lakehouse.joins.checks); the events' files need no keeping for it.
EVENTS_PIN = "events"


def table_versions(settings: Settings, version: str) -> dict[str, int]:
    """The latest Delta version of each table serving reads of `version`, and of its events
    (EVENTS_PIN); existing ones only."""
    tables = {**served_tables(version), EVENTS_PIN: outputs_of(version).silver}
    found = {n: table_version(settings, t) for n, t in tables.items()}
    return {n: v for n, v in found.items() if v is not None}


def _last_pinned(history: list[dict[str, Any]], version: str) -> dict[str, Any] | None:
    """The pointer row that recorded `version`'s pins last: where its gate last passed."""
    for row in reversed(history):
        if row["version"] == version and row["action"] in PINNING and row.get("pins"):
            return row
    return None


def pins_of(history: list[dict[str, Any]], version: str) -> dict[str, int] | None:
    """The table versions serving reads `version` at: where its gate last passed. None for a
    version promoted before pins were recorded: serving reads its latest."""
    row = _last_pinned(history, version)
    return dict(row["pins"]) if row else None


def pinned_since(history: list[dict[str, Any]], version: str) -> datetime | None:
    """When serving moved to `version`'s pins (None: it has none)."""
    row = _last_pinned(history, version)
    return from_micros(row["at_micros"]) if row else None


def pinned_table_versions(settings: Settings, version: str) -> dict[str, int]:
    """Per table name, the Delta version serving reads of `version` now or after a rollback
    to it: what its writer's vacuum must keep readable."""
    pins = pins_of(pointer_history(settings), version) or {}
    tables = served_tables(version)
    return {tables[name].name: v for name, v in pins.items() if name in tables}


# Serving reads a version at its pins, which its vacuums keep (lakehouse.core.delta_io.
# retention_keeping), but Delta drops commits older than delta.logRetentionDuration (30 days by
# default) from a table's log, and pins older than that may no longer be readable.
STALE_PINS = timedelta(days=7)


def unserved_note(version: str, since: datetime | None, now: datetime) -> str:
    """What `jobs.versions list` says of an active version serving does not read all of."""
    when = ""
    if since is not None:
        when = f" ({since:%Y-%m-%d %H:%M} UTC, {(now - since) / timedelta(hours=1):.0f} h ago)"
    note = (
        f"serving reads {version} as its last passed gate saw it{when}: what "
        f"was written since is not served (the promote_version DAG, or `python -m jobs.versions "
        f"promote {version}`, checks it again)"
    )
    if since is not None and now - since > STALE_PINS:
        note += (
            f"\nwarning: its gate has not passed for over {STALE_PINS.days} days; Delta drops "
            "commits older than delta.logRetentionDuration (30 days by default) from a table's "
            "log, and serving could then no longer read these pins: fix the cause and replay, "
            "roll back, or promote --force"
        )
    return note


def served_version(settings: Settings) -> tuple[str, dict[str, int] | None]:
    """The active version and its pins, from one read of the pointer."""
    history = pointer_history(settings)
    active = str(history[-1]["active"]) if history else LIVE
    return active, pins_of(history, active)


def switch_pointer(
    spark: SparkSession,
    settings: Settings,
    action: str,
    version: str,
    active: str,
    forced: bool = False,
    gate: str = "",
    pins: dict[str, int] | None = None,
) -> None:
    previous = active_version(settings)
    row = {
        "at": datetime.now(UTC),
        "action": action,
        "version": version,
        "previous": previous,
        "active": active,
        "forced": forced,
        "gate": gate,
        "by": actor(),
        "pins": pins,
    }
    df = small_frame(spark, [row], POINTER)
    # mergeSchema: a pointer table written before pins existed gains the column.
    df.write.format("delta").mode("append").option("mergeSchema", "true").save(
        POINTER.path(settings)
    )
