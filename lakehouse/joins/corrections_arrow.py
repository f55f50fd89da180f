"""A correcting enrichment batch's earlier rows, found on the driver while few.

A batch that corrects earlier events (lakehouse.joins.enrichment) needs the latest row of each
earlier event a dimension change may re-enrich. Through Spark that is a read of
silver.events_enriched (its Delta state rebuilt first), two semi-joins and a window: the
costliest step of the batch. While the files that may hold those rows hold at most
`speed.correction_read_rows` rows, delta-rs reads them, and Arrow keeps each changed key's
events' latest rows and, when the changes were found on the driver too, the affected ones
(transforms.enrichment.affected_of_rows), which go to Spark as one local frame.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from lakehouse.core.small_tables import rows_within
from lakehouse.core.times import from_micros
from lakehouse.joins.dimensions import DIMENSIONS
from lakehouse.transforms.enrichment import affected_of_rows

if TYPE_CHECKING:
    from lakehouse.core.config import Settings
    from lakehouse.core.tables import Table
    from lakehouse.joins.corrections import Changed


def earlier_latest(
    settings: Settings, enriched: Table, batch_id: int, changes: Mapping[str, Changed]
) -> pa.Table | None:
    """The latest row, among those batches before `batch_id` wrote to `enriched`, of each
    earlier event of a key the `changes` changed (dimension name -> its changes), from the
    earliest instant they bear on; None when no key changed, when the files that may hold
    those rows hold more than `speed.correction_read_rows` rows, when the rows read are more
    than `speed.delta_rs_append_mb` MiB, or when delta-rs cannot read them: read them through
    Spark then (corrections.earlier_rows)."""
    bounds = [c.since for c in changes.values() if c.since is not None]
    if not bounds:
        return None
    keys = {
        DIMENSIONS[name][0].event_key: (
            c.rows if c.rows is not None else c.starts.select("_key").toArrow()
        )["_key"]
        for name, c in changes.items()
    }
    where = ds.field("enriched_batch") < batch_id
    # A key new to the history had `unknown` events at any time: every row is read then.
    if not any(c.new_keys for c in changes.values()):
        since = from_micros(min(bounds))
        # The partition first: delta-rs skips the days before without opening their files.
        day = ds.field("event_date") >= pa.scalar(since.date(), pa.date32())
        instant = ds.field("event_time") >= pa.scalar(since, pa.timestamp("us", "UTC"))
        where = day & instant & where
    speed = settings.speed
    rows = rows_within(settings, enriched, where, speed.correction_read_rows)
    # The rows go to Spark in its tasks (a local frame): bounded in bytes as an append is.
    if rows is None or rows.nbytes > speed.delta_rs_append_mb << 20:
        return None
    return latest_of_keys(rows, keys)


def latest_of_keys(rows: pa.Table, keys: Mapping[str, pa.ChunkedArray]) -> pa.Table:
    """Each event's latest row (its highest enriched_batch, as corrections.latest_rows) among
    `rows` whose key column holds one of its `keys` (event key column -> keys), in `rows`'
    columns. All rows of an event share its keys, so it keeps all its rows or none."""
    kept = pa.array([False] * rows.num_rows, pa.bool_())
    for column, values in keys.items():
        found = pc.is_in(rows[column], value_set=values.combine_chunks().cast(pa.string()))
        kept = pc.or_(kept, pc.fill_null(found, False))
    candidates = rows.filter(kept)
    last = candidates.group_by("event_id").aggregate([("enriched_batch", "max")])
    last = last.select(["event_id", "enriched_batch_max"]).rename_columns(
        ["event_id", "enriched_batch"]
    )
    latest = candidates.join(last, ["event_id", "enriched_batch"], join_type="inner")
    return latest.select(rows.column_names)


def affected_rows(latest: pa.Table, changes: Mapping[str, Changed]) -> pa.Table:
    """The events among `latest` (one row each) that the `changes`, found on the driver (their
    `rows`), may re-enrich: affected_of_rows for each dimension, each event once."""
    found = [
        affected_of_rows(latest, c.rows, DIMENSIONS[name][0])
        for name, c in changes.items()
        if c.rows is not None
    ]
    both = pa.concat_tables(found) if found else latest.slice(0, 0)
    once = pc.index_in(latest["event_id"], value_set=both["event_id"].combine_chunks())
    return latest.filter(pc.is_valid(once))
