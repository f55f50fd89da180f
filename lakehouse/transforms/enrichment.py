"""Click-stream events enriched with the shop's dimensions as of their own time, the revenue
view over them, and the corrections a late dimension change makes.

- `enrich_events`: each event with its product's category and list price and its user's
  segment and country, from the versions valid at its event_time (lakehouse.transforms.as_of).
- `revenue_by_segment`: purchases per hour, user segment and product category: how many, and
  the revenue (the events' amounts). An event whose dimension had no version at its time is
  counted under a label that says why ("(unknown)", "(deleted)", "(not_yet)", "(none)"), so
  the view's totals are all the purchases' totals.
- A dimension change can reach the lakehouse after events it bears on (the changelog runs
  behind, or a business clock is set back). `change_starts` says from when on each changed
  key's events may be enriched otherwise, `affected_events` picks those events, and
  `correction_partials` turns their enrichment before and after into the view's partial rows
  that take the old contribution out and put the new one in: the view's partial rows,
  corrections included, add up to the view of the events enriched with the whole history,
  which is what the batch layer computes.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from lakehouse.cdc.shop import PRODUCTS, USERS
from lakehouse.transforms.as_of import (
    MATCHED,
    UNKNOWN,
    Dimension,
    join_timeline,
    join_timeline_of_rows,
    timeline,
)

if TYPE_CHECKING:
    import pyarrow as pa

PRODUCT = Dimension(
    PRODUCTS, "product_id", {"category": "category", "price": "list_price"}, "product"
)
USER = Dimension(USERS, "user_id", {"segment": "segment", "country": "country"}, "user")
DIMENSIONS = (PRODUCT, USER)
# What an enriched event adds to the event's own columns.
ENRICHED_COLUMNS = tuple(c for d in DIMENSIONS for c in d.output_columns)

PURCHASE = "purchase"
WINDOW = "1 hour"
VIEW_KEYS = ("window_start", "window_end", "segment", "category")
VIEW_MEASURES = ("purchases", "revenue")
# change_starts' rows: each changed key, from when on its events may change, and whether it
# is new to the history.
STARTS_SCHEMA = "_key string, _from timestamp, _new boolean"


def enrich_events(
    events: DataFrame, users_history: DataFrame, products_history: DataFrame
) -> DataFrame:
    """`events` with ENRICHED_COLUMNS, each event once."""
    return enrich_by_timelines(
        events, timeline(users_history, USER), timeline(products_history, PRODUCT)
    )


def enrich_by_timelines(
    events: DataFrame, users_timeline: DataFrame, products_timeline: DataFrame
) -> DataFrame:
    """enrich_events with the dimensions' timelines (as_of.timeline) built beforehand: a
    stream builds them once per history version, not once per batch."""
    return events.transform(join_timeline, products_timeline, PRODUCT).transform(
        join_timeline, users_timeline, USER
    )


def enrich_of_rows(
    events: pa.Table, users_timeline: pa.Table, products_timeline: pa.Table
) -> pa.Table:
    """enrich_by_timelines of rows on the driver (a micro-batch's few events, the timelines'
    rows): the same rows as Arrow, without a Spark job (as_of.join_timeline_of_rows)."""
    products = join_timeline_of_rows(events, products_timeline, PRODUCT)
    return join_timeline_of_rows(products, users_timeline, USER)


def _label(dimension: Dimension, column: str) -> Column:
    """The dimension's value, or why there was none: "(deleted)", "(unknown)", ..."""
    status = F.col(dimension.status_column)
    why = F.concat(F.lit("("), F.when(status == "no_key", "none").otherwise(status), F.lit(")"))
    return F.when(status == MATCHED, F.col(column)).otherwise(why)


def _signed_purchases(enriched: DataFrame, sign: Column) -> DataFrame:
    window = F.window("event_time", WINDOW)
    return enriched.where(F.col("event_type") == PURCHASE).select(
        window["start"].alias("window_start"),
        window["end"].alias("window_end"),
        _label(USER, "segment").alias("segment"),
        _label(PRODUCT, "category").alias("category"),
        sign.cast("bigint").alias("purchases"),
        (sign * F.coalesce("amount", F.lit(0))).cast("decimal(28,2)").alias("revenue"),
    )


def _sum(signed: DataFrame) -> DataFrame:
    return signed.groupBy(*VIEW_KEYS).agg(
        F.sum("purchases").alias("purchases"), F.sum("revenue").alias("revenue")
    )


def revenue_by_segment(enriched: DataFrame) -> DataFrame:
    """Purchases and revenue per hour window, segment and category (VIEW_KEYS)."""
    return _sum(_signed_purchases(enriched, F.lit(1)))


def revenue_of_rows(enriched: pa.Table, signed: bool = False) -> pa.Table:
    """revenue_by_segment of enriched rows on the driver (a micro-batch's few, collected for
    their commit): the same rows as Arrow, without a Spark job; `signed`: partials_of, of net
    rows. Kept equal to both by tests/unit/transforms/test_enrichment.py."""
    import pyarrow as pa
    import pyarrow.compute as pc

    bought = enriched.filter(pc.equal(enriched["event_type"], PURCHASE))

    def label(dimension: Dimension, column: str) -> pa.ChunkedArray:
        status = bought[dimension.status_column]
        why = pc.if_else(pc.equal(status, "no_key"), "none", status)
        return pc.if_else(
            pc.equal(status, MATCHED),
            bought[column],
            pc.binary_join_element_wise("(", why, ")", ""),
        )

    start = pc.floor_temporal(bought["event_time"], unit="hour")  # WINDOW, aligned to the epoch
    amount = bought["amount"]
    revenue = pc.fill_null(amount, pa.scalar(0, amount.type)).cast(pa.decimal128(28, 2))
    purchases: pa.Array | pa.ChunkedArray = pa.array([1] * bought.num_rows, pa.int64())
    if signed:
        purchases = bought["_side"].cast(pa.int64())
        revenue = pc.if_else(pc.greater(purchases, 0), revenue, pc.negate(revenue))
    each = pa.table(
        {
            "window_start": start,
            "window_end": pc.add(start, pa.scalar(3_600_000_000, pa.duration("us"))),
            "segment": label(USER, "segment"),
            "category": label(PRODUCT, "category"),
            "purchases": purchases,
            "revenue": revenue,
        }
    )
    summed = each.group_by(list(VIEW_KEYS)).aggregate([(m, "sum") for m in VIEW_MEASURES])
    return pa.table(
        {name: summed[name] for name in VIEW_KEYS} | {m: summed[f"{m}_sum"] for m in VIEW_MEASURES}
    )


def combine_revenue(partials: DataFrame) -> DataFrame:
    """Partial rows of the view (a batch's, a correction's) -> the view: summed by key, the
    rows a correction emptied dropped."""
    combined = _sum(partials)
    return combined.where((F.col("purchases") != 0) | (F.col("revenue") != 0))


def change_starts(now: DataFrame, was: DataFrame, dimension: Dimension) -> DataFrame:
    """Per key the history rows `now` added or rewrote against `was` (the same history at an
    earlier version): `_key`, `_from`, the earliest instant at which an event of that key may
    be enriched otherwise, and `_new`, whether the key had no version at all in `was`.

    A version is its key and `lsn`; what a change may rewrite in it is only where it ends (a
    later version's start or a delete). A version new to `now` bears from its start on; a
    version `was` already held, from the earlier of its two ends on, since before either end
    it holds the same instants with the same columns. Anything else found rewritten (no end on
    either side, an unknown LSN) counts from the version's start, which is always safe."""
    [key] = dimension.table.key
    rows = now.exceptAll(was)
    ends = was.select(key, "lsn", F.col("valid_to").alias("_was_to"), F.lit(True).alias("_held"))
    continued = F.coalesce(F.least("valid_to", "_was_to"), F.col("valid_from"))
    start = F.when(F.col("_held"), continued).otherwise(F.col("valid_from"))
    known = was.select(F.col(key).alias("_key")).distinct().withColumn("_known", F.lit(True))
    return (
        rows.join(ends, [key, "lsn"], "left")
        .groupBy(F.col(key).alias("_key"))
        .agg(F.min(start).alias("_from"))
        .join(known, "_key", "left")
        .select("_key", "_from", F.col("_known").isNull().alias("_new"))
    )


def affected_events(enriched: DataFrame, starts: DataFrame, dimension: Dimension) -> DataFrame:
    """The enriched events whose `dimension` columns may differ once a change is in (`starts`,
    from change_starts): those of a changed key at or after its `_from`, and those of a
    changed key that had no version at all (`unknown`: it may be `not_yet` now)."""
    reached = (F.col("event_time") >= F.col("_from")) | (F.col(dimension.status_column) == UNKNOWN)
    matches = (F.col(dimension.event_key) == F.col("_key")) & reached
    return enriched.join(F.broadcast(starts.select("_key", "_from")), matches, "left_semi")


def change_starts_of_rows(now: pa.Table, was: pa.Table, dimension: Dimension) -> pa.Table:
    """change_starts of a history's two versions on the driver (a history is small: the as-of
    join broadcasts its timeline), as Arrow: the same rows, without a Spark job. Kept equal to
    it by tests/unit/transforms/test_enrichment.py."""
    import pyarrow as pa

    [key] = dimension.table.key
    earlier = was.to_pylist()
    # exceptAll: a row of `now` is no change while `was` holds it as many times.
    unmatched = Counter(tuple(r.values()) for r in earlier)
    ends: dict[tuple[Any, Any], list[Any]] = {}
    for r in earlier:
        ends.setdefault((r[key], r["lsn"]), []).append(r["valid_to"])
    starts: dict[Any, Any] = {}
    for r in now.select(was.column_names).to_pylist():
        row = tuple(r.values())
        if unmatched[row] > 0:
            unmatched[row] -= 1
            continue
        held = ends.get((r[key], r["lsn"]))
        # Spark's least and min skip nulls; coalesce falls back to the version's start.
        found = (
            [r["valid_from"]]
            if held is None
            else [_least(r["valid_to"], to) or r["valid_from"] for to in held]
        )
        starts[r[key]] = _least(starts.get(r[key]), *found)
    known = {r[key] for r in earlier}
    return pa.table(
        {
            "_key": pa.array(list(starts), pa.string()),
            "_from": pa.array(list(starts.values()), pa.timestamp("us", "UTC")),
            "_new": pa.array([k not in known for k in starts], pa.bool_()),
        }
    )


def _least(*values: Any) -> Any:
    present = [v for v in values if v is not None]
    return min(present) if present else None


def affected_of_rows(enriched: pa.Table, starts: pa.Table, dimension: Dimension) -> pa.Table:
    """affected_events of rows on the driver (each event once, as its latest row), with
    change_starts_of_rows' `starts`: the same rows, in `enriched`'s columns. Kept equal to it
    by tests/unit/transforms/test_enrichment.py."""
    import pyarrow.compute as pc

    joined = enriched.join(
        starts.select(["_key", "_from"]), dimension.event_key, "_key", join_type="inner"
    )
    reached = pc.or_kleene(
        pc.greater_equal(joined["event_time"], joined["_from"]),
        pc.equal(joined[dimension.status_column], UNKNOWN),
    )
    return joined.filter(reached).select(enriched.column_names)


def net_rows(before: DataFrame, after: DataFrame) -> DataFrame:
    """The rows of `before` that `after` lacks (`_side` -1: an event as it was enriched) and
    the rows of `after` that `before` lacks (+1: as it is enriched now): what both
    `corrected_of` and `partials_of` are made from (a caller may compute it once for both)."""
    columns = before.columns
    sides = before.select(*columns, F.lit(-1).alias("_side")).unionByName(
        after.select(*columns, F.lit(1).alias("_side"))
    )
    # A row on both sides nets to 0. (Not exceptAll: Spark mistakes the two sides for one
    # when `after` is `before` itself.)
    return sides.groupBy(*columns).agg(F.sum("_side").alias("_side")).where("_side != 0")


def net_of_rows(before: pa.Table, after: pa.Table) -> pa.Table:
    """net_rows on the driver, of `before` and `after` holding one row per event each (an
    event's latest row, and its enrichment again): the two rows of each event whose row
    changed, `_side` -1 and +1, in `before`'s columns; the same rows, without a Spark job.
    Kept equal to it by tests/unit/transforms/test_enrichment.py."""
    import pyarrow as pa
    import pyarrow.compute as pc

    columns = before.column_names
    others = [c for c in columns if c != "event_id"]
    theirs = [f"_after_{c}" for c in others]
    after = after.select(columns).cast(before.schema)
    paired = before.append_column("_ours", pa.array([True] * before.num_rows)).join(
        after.select(["event_id", *others])
        .rename_columns(["event_id", *theirs])
        .append_column("_theirs", pa.array([True] * after.num_rows)),
        "event_id",
        join_type="full outer",
    )
    # An event on one side only changed; on both, as groupBy compares: two nulls are equal.
    same = pc.and_(pc.is_valid(paired["_ours"]), pc.is_valid(paired["_theirs"]))
    for column, their in zip(others, theirs, strict=True):
        ours, other = paired[column], paired[their]
        equal = pc.fill_null(pc.equal(ours, other), False)
        same = pc.and_(same, pc.or_(equal, pc.and_(pc.is_null(ours), pc.is_null(other))))
    changed = paired.filter(pc.invert(same))["event_id"].combine_chunks()

    def side(rows: pa.Table, sign: int) -> pa.Table:
        kept = rows.filter(pc.is_in(rows["event_id"], value_set=changed))
        return kept.append_column("_side", pa.array([sign] * kept.num_rows, pa.int64()))

    return pa.concat_tables([side(before, -1), side(after, 1)])


def corrected_rows(before: DataFrame, after: DataFrame) -> DataFrame:
    """The events of `after` (the events of `before` enriched again) enriched otherwise."""
    return corrected_of(net_rows(before, after))


def corrected_of(net: DataFrame) -> DataFrame:
    """corrected_rows, from their net_rows."""
    return net.where("_side > 0").drop("_side")


def correction_partials(before: DataFrame, after: DataFrame) -> DataFrame:
    """The view's partial rows that turn `before` (events as they were enriched) into `after`
    (the same events enriched again): each event whose enriched row changed taken out as it
    was and put in as it is. Events enriched alike give nothing."""
    return partials_of(net_rows(before, after))


def partials_of(net: DataFrame) -> DataFrame:
    """correction_partials, from their net_rows."""
    return _sum(_signed_purchases(net, F.col("_side")))
