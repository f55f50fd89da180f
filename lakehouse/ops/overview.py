"""What the Tributary view in the Airflow UI shows: the replay versions and which one serving
reads, the stream's health over its recent micro-batches, and the latest reconciliation and
quality results with their reports.

Everything is read with delta-rs (lakehouse.core.small_tables, lakehouse.speed.progress): a page
answers in about a second, without starting Spark.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from lakehouse.core.config import Settings
from lakehouse.core.small_tables import table_rows
from lakehouse.core.tables import table
from lakehouse.replay.promotion import Listing, list_all
from lakehouse.replay.versions import LIVE, VersionInfo
from lakehouse.speed.progress import Health, judge_health, latest_progress

RECONCILIATIONS = table("dq.reconciliation_runs")
QUALITY_RUNS = table("dq.quality_runs")
# The micro-batches the health charts show.
CHART_BATCHES = 120


@dataclass(frozen=True)
class Overview:
    mode: str  # lambda or kappa: what serving reads
    listing: Listing
    health: Health | None  # None while Kafka cannot be asked how far the log goes
    progress: list[dict[str, Any]]  # the newest micro-batches, oldest first
    reconciliations: list[dict[str, Any]]  # the newest run per view and pair of sides
    quality: list[dict[str, Any]]  # the newest run per table


def overview(settings: Settings, now: datetime | None = None, ask_kafka: bool = True) -> Overview:
    """`ask_kafka`: judge the stream's health, which needs the log's end offsets."""
    from lakehouse.core.kafka_offsets import end_offsets

    rows = latest_progress(settings, CHART_BATCHES)
    health = None
    try:
        if ask_kafka:
            ends = end_offsets(settings)
            health = judge_health(rows, now or datetime.now(UTC), ends, settings)
    except Exception:  # the page shows the rest while Kafka is down
        health = None
    return Overview(
        mode=settings.mode,
        listing=list_all(settings),
        health=health,
        progress=list(reversed(rows)),
        reconciliations=newest_by(
            table_rows(settings, RECONCILIATIONS),
            ("view", "left_source", "right_source"),
            "started_at",
        ),
        quality=newest_by(table_rows(settings, QUALITY_RUNS), ("table_name",), "checked_at"),
    )


def newest_by(rows: list[dict[str, Any]], key: tuple[str, ...], at: str) -> list[dict[str, Any]]:
    """The newest row (by `at`) of each `key`, in key order."""
    newest: dict[tuple[Any, ...], dict[str, Any]] = {}
    for row in rows:
        k = tuple(row[c] for c in key)
        if k not in newest or (row[at] or datetime.min) > (newest[k][at] or datetime.min):
            newest[k] = row
    return [newest[k] for k in sorted(newest, key=lambda k: tuple(map(str, k)))]


def promotion_effect(version: VersionInfo, active: str, mode: str) -> str:
    """What promoting `version` would change, said before anyone clicks."""
    if version.status == "removed":
        return "cannot be promoted: it was removed (its tables are deleted)"
    if version.status != "caught_up":
        return f"cannot be promoted: it has not caught up (status {version.status})"
    if version.version == active:
        return "active: promoting it again checks what its extensions added, then serves it"
    change = f"the active version becomes {version.version} (now {active})"
    if mode == "kappa":
        return f"{change}, and serving reads it at once, once its reconciliation gate passes"
    return (
        f"{change} once its reconciliation gate passes; nothing is served from it in lambda "
        "mode (serving reads batch + speed until the mode is kappa)"
    )


def served_by(listing: Listing, mode: str) -> str:
    """Which tables serving reads now, in words."""
    if mode == "kappa":
        if listing.active == LIVE:
            return "the live speed layer's tables (kappa mode, no version promoted)"
        return f"replay version {listing.active} (kappa mode)"
    return "batch where the batch has run, speed after that (lambda mode)"
