"""A replay version's enrichment, judged: which of its revenue rows kappa serving may read.

`jobs.enrich_replay` enriches the version's events in an available-now run, judges what it
wrote (lakehouse.joins.reconcile) and records the verdict in the version's
`enrichment_checks`: the last batch judged, and a version of its events table every event of
which the run had read (taken before the run starts: an available-now run reads at least that
far). Serving reads the active version's revenue from the partial rows of the batches up to
its last passed check, and only when that check had read every event the version's pins cover
(lakehouse.serving.revenue).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

import pyarrow.compute as pc

from lakehouse.core.delta_io import append_new, small_frame
from lakehouse.core.small_tables import table_rows

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from lakehouse.core.config import Settings
    from lakehouse.joins.outputs import EnrichmentOutputs
    from lakehouse.joins.reconcile import EnrichmentReconciliation


def record_check(
    spark: SparkSession,
    settings: Settings,
    outputs: EnrichmentOutputs,
    judged: EnrichmentReconciliation,
    events_version: int,
) -> None:
    """The judge's verdict on `outputs` as of `judged.batch_id`, whose run had read every event
    of `outputs.events` at `events_version`. The caller holds the outputs' writer lock."""
    row = {
        "batch_id": judged.batch_id,
        "events_version": events_version,
        "equal": judged.equal,
        "events_compared": judged.events.compared,
        "windows_compared": judged.windows.compared,
        "checked_at": datetime.now(UTC),
    }
    append_new(small_frame(spark, [row], outputs.checks), outputs.checks, settings)


def last_passed_batch(
    settings: Settings, outputs: EnrichmentOutputs, events_pinned: int | None
) -> int | None:
    """The last batch a passed check judged, of those that had read the events table at least
    up to `events_pinned` (None: any); None when no check qualifies. Read without Spark."""
    passed = table_rows(settings, outputs.checks, pc.field("equal"))
    if events_pinned is not None:
        passed = [c for c in passed if c["events_version"] >= events_pinned]
    return max((int(c["batch_id"]) for c in passed), default=None)
