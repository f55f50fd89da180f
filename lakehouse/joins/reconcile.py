"""The enrichment's judge: the stream's enriched events and revenue view against their
recompute, as of the stream's last completed batch.

The recompute joins the events the stream had enriched by then with the history tables at
that batch's pins, all at once (lakehouse.transforms.enrichment, the stream's own functions),
and sums the view from them. The stream must agree row for row: each event's latest row in
silver.events_enriched is the recompute's row, and speed.revenue_by_segment's partial rows up
to that batch, corrections included, add up to the recomputed view, window by window. Rows
of a batch the stream is still writing (a later batch id) are left out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from lakehouse.core.config import Settings
from lakehouse.core.delta_io import read_table, table_exists
from lakehouse.core.small_tables import has_rows
from lakehouse.joins.corrections import latest_rows
from lakehouse.joins.dimensions import history_at
from lakehouse.joins.enrichment import EVENT_COLUMNS, ROW_COLUMNS, pins_of
from lakehouse.joins.outputs import EnrichmentOutputs
from lakehouse.transforms.enrichment import (
    ENRICHED_COLUMNS,
    VIEW_KEYS,
    VIEW_MEASURES,
    combine_revenue,
    enrich_events,
    revenue_by_segment,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from lakehouse.core.tables import Table

EXAMPLES = 5


class NothingToReconcile(Exception):
    """The enrichment stream has completed no batch yet."""


@dataclass(frozen=True)
class Comparison:
    compared: int  # rows either side has
    differing: int
    examples: list[str] = field(default_factory=list)  # the first differing rows, by key


@dataclass(frozen=True)
class EnrichmentReconciliation:
    batch_id: int
    events: Comparison  # by event_id
    windows: Comparison  # by the view's keys

    @property
    def equal(self) -> bool:
        return self.events.differing == 0 and self.windows.differing == 0


def reconcile_enrichment(
    spark: SparkSession, settings: Settings, outputs: EnrichmentOutputs | None = None
) -> EnrichmentReconciliation:
    """The live stream's enrichment (or a replay version's, `outputs`) against its recompute."""
    outputs = outputs or EnrichmentOutputs.live()
    last = last_batch(spark, settings, outputs.progress)
    if last is None:
        raise NothingToReconcile(not_started(outputs))
    app, batch_id = last
    pins = pins_of(spark, settings, app, batch_id, outputs.pins)
    assert pins is not None, "a completed batch recorded its pins first"
    users, products = (
        history_at(spark, settings, name, pins[name]) for name in ("users", "products")
    )
    done = read_table(spark, outputs.enriched, settings).where(F.col("enriched_batch") <= batch_id)
    stream_rows = latest_rows(done).select(*ROW_COLUMNS).localCheckpoint()
    again = enrich_events(stream_rows.select(*EVENT_COLUMNS), users, products)
    recomputed = (
        again.join(stream_rows.select("event_id", "event_date"), "event_id")
        .select(*ROW_COLUMNS)
        .localCheckpoint()  # both comparisons read it
    )
    partials = read_table(spark, outputs.revenue, settings).where(F.col("batch_id") <= batch_id)
    return EnrichmentReconciliation(
        batch_id,
        compare(recomputed, stream_rows, ("event_id",), ENRICHED_COLUMNS),
        compare(
            combine_revenue(revenue_by_segment(recomputed)),
            combine_revenue(partials.drop("batch_id")),
            VIEW_KEYS,
            VIEW_MEASURES,
        ),
    )


def check_started(settings: Settings, outputs: EnrichmentOutputs | None = None) -> None:
    """NothingToReconcile, read from the progress table without Spark, before the stream's
    (or a replay version's) first completed batch."""
    outputs = outputs or EnrichmentOutputs.live()
    if not has_rows(settings, outputs.progress):
        raise NothingToReconcile(not_started(outputs))


def not_started(outputs: EnrichmentOutputs) -> str:
    which = "the enrichment stream" if outputs.name == "live" else f"{outputs.name}'s enrichment"
    return f"{which} has completed no batch yet"


def last_batch(spark: SparkSession, settings: Settings, progress: Table) -> tuple[str, int] | None:
    """The (app id, batch id) of the stream's last completed batch, or None."""
    if not table_exists(spark, progress, settings):
        return None
    rows = read_table(spark, progress, settings).orderBy(F.desc("processed_at")).limit(1)
    found = rows.collect()
    return (found[0]["app_id"], int(found[0]["batch_id"])) if found else None


def compare(
    recomputed: DataFrame, stream: DataFrame, keys: tuple[str, ...], values: tuple[str, ...]
) -> Comparison:
    """Rows by `keys`: how many either side has, how many differ in `values` (or are on one
    side only), and the first of those named."""
    left = recomputed.select(*keys, F.struct(*values).alias("_recomputed"))
    right = stream.select(*keys, F.struct(*values).alias("_stream"))
    # Evaluated once for the examples and both counts.
    both = left.join(right, list(keys), "full_outer").localCheckpoint()
    differing = both.where(~F.col("_recomputed").eqNullSafe(F.col("_stream")))
    first = differing.orderBy(*keys).limit(EXAMPLES).collect()
    examples = [
        ", ".join(f"{k}={row[k]}" for k in keys)
        + f": {_side(row['_recomputed'])} in the recompute, {_side(row['_stream'])} in the stream"
        for row in first
    ]
    return Comparison(both.count(), differing.count(), examples)


def _side(value: object) -> str:
    return (
        "nothing" if value is None else str(value.asDict() if hasattr(value, "asDict") else value)
    )
