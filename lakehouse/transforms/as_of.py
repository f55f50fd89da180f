"""Events joined with the dimension rows valid at their own time (as-of joins on the type-2
history tables, silver.<table>_history).

An event at `event_time` t takes, from a dimension, the version of its key whose validity
[valid_from, valid_to) holds t (valid_to null: still current): the price a product had when
it was bought, the segment a user was in when they clicked, whatever has changed since. The
event keeps its place when no version holds t, with the dimension's columns null and a
status that says why, so nothing is dropped and nothing is guessed:

- `matched`: a version held t;
- `no_key`: the event names no key (a page view has no product);
- `unknown`: the key has no version at all (never inserted, or not captured yet);
- `not_yet`: the key's first version starts after t (the event is older than the row);
- `deleted`: the key had versions before t but none holds t: a delete had ended the row
  (a product deleted while events still refer to it), and no insert had brought it back.

A version's start is the row's business clock (updated_at), which the application sets. If
that clock ever went backwards, two versions could both hold t; the one committed last (the
higher LSN) wins, so an event matches at most one version of each dimension.

Pure and deterministic: the stream, the batch and a replay give the same rows for the same
events and history, whichever way the events are cut into batches.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

if TYPE_CHECKING:
    import pyarrow as pa

    from lakehouse.cdc.shop import CapturedTable

MATCHED, NO_KEY, UNKNOWN, NOT_YET, DELETED = "matched", "no_key", "unknown", "not_yet", "deleted"
STATUSES = (MATCHED, NO_KEY, UNKNOWN, NOT_YET, DELETED)


@dataclass(frozen=True)
class Dimension:
    """One dimension an event is joined with, and what it takes from it."""

    table: CapturedTable
    event_key: str  # the event's column holding the dimension's key (one-column keys only)
    columns: Mapping[str, str]  # dimension column -> the enriched event's column
    prefix: str  # names its status and version columns: <prefix>_match, <prefix>_version_lsn

    def __post_init__(self) -> None:
        if len(self.table.key) != 1:
            raise ValueError(f"{self.table.name}: as-of joins need a one-column key")
        unknown = set(self.columns) - set(self.table.column_names)
        if unknown:
            raise ValueError(f"{self.table.name} has no columns {sorted(unknown)}")

    @property
    def status_column(self) -> str:
        return f"{self.prefix}_match"

    @property
    def version_column(self) -> str:
        """The LSN that opened the version the event took (null unless matched): which
        version an enriched row used, so a comparison can name it."""
        return f"{self.prefix}_version_lsn"

    @property
    def output_columns(self) -> tuple[str, ...]:
        return (*self.columns.values(), self.status_column, self.version_column)


def as_of_join(
    events: DataFrame,
    history: DataFrame,
    dimension: Dimension,
    identity: str = "event_id",
    time_column: str = "event_time",
) -> DataFrame:
    """`events` (one row per `identity`) with `dimension`'s columns as of each event's time,
    its status (STATUSES) and the version's LSN; every event once, in any order."""
    return join_timeline(events, timeline(history, dimension), dimension, time_column)


def timeline(history: DataFrame, dimension: Dimension) -> DataFrame:
    """The dimension's history as each key's timeline: segments [seg_from, seg_to) (null: no
    bound) that cover all time without overlapping, each with the version that holds in it
    (the one committed last, where versions overlap) or, where none does, the status that
    says why (NOT_YET before the key's first version, DELETED after it). An event then falls
    in exactly one segment of its key, so the join needs no ranking of candidates; build it
    once per history version, beside the events it is joined with."""
    [key] = dimension.table.key
    versions = history.select(
        F.col(key).alias("_key"),
        "valid_from",
        "valid_to",
        F.col("lsn").alias("_lsn"),
        *(F.col(c).alias(f"_d_{c}") for c in dimension.columns),
    )
    # A version holds over a whole segment or none of it: each segment runs between two
    # consecutive instants at which some version of the key starts or ends. A version that
    # ends before it starts (a clock set back) holds no instant, so its end bounds nothing; it
    # could lie before the key's first start, where the lead-in segment already holds.
    bounds = (
        versions.select("_key", F.col("valid_from").alias("seg_from"))
        .unionByName(
            versions.where(F.col("valid_to") > F.col("valid_from")).select(
                "_key", F.col("valid_to").alias("seg_from")
            )
        )
        .distinct()
    )
    following = Window.partitionBy("_key").orderBy("seg_from")
    segments = bounds.withColumn("seg_to", F.lead("seg_from").over(following))
    first = versions.groupBy("_key").agg(F.min("valid_from").alias("seg_to"))
    lead_in = first.select("_key", F.lit(None).cast("timestamp").alias("seg_from"), "seg_to")
    holds = (
        (F.col("_s._key") == F.col("_v._key"))
        & (F.col("_v.valid_from") <= F.col("_s.seg_from"))
        & (F.col("_v.valid_to").isNull() | (F.col("_s.seg_from") < F.col("_v.valid_to")))
    )
    covered = segments.alias("_s").join(versions.alias("_v"), holds, "left")
    last = Window.partitionBy("_s._key", "_s.seg_from").orderBy(F.col("_v._lsn").desc_nulls_last())
    picked = (
        covered.withColumn("_pick", F.row_number().over(last))
        .where("_pick = 1")
        .select(
            "_s.*",
            "_v._lsn",
            *(f"_v._d_{c}" for c in dimension.columns),
            F.when(F.col("_v._lsn").isNotNull(), F.lit(MATCHED))
            .otherwise(F.lit(DELETED))
            .alias("_status"),
        )
    )
    return picked.unionByName(
        lead_in.withColumn("_status", F.lit(NOT_YET)), allowMissingColumns=True
    )


def join_timeline(
    events: DataFrame, segments: DataFrame, dimension: Dimension, time_column: str = "event_time"
) -> DataFrame:
    """as_of_join with the dimension's `timeline`: each event and the one segment of its key
    that holds its time; UNKNOWN for a key with none, NO_KEY for an event without a key."""
    key, at = F.col(f"_e.{dimension.event_key}"), F.col(f"_e.{time_column}")
    holds = (
        (key == F.col("_t._key"))
        & (F.col("_t.seg_from").isNull() | (F.col("_t.seg_from") <= at))
        & (F.col("_t.seg_to").isNull() | (at < F.col("_t.seg_to")))
    )
    # A dimension's timeline is small beside the events: sent to every task, not shuffled.
    joined = events.alias("_e").join(F.broadcast(segments.alias("_t")), holds, "left")
    status = (
        F.when(key.isNull(), F.lit(NO_KEY))
        .when(F.col("_t._status").isNull(), F.lit(UNKNOWN))
        .otherwise(F.col("_t._status"))
    )
    return joined.select(
        *(F.col(f"_e.`{c}`") for c in events.columns),
        *(F.col(f"_t._d_{c}").alias(out) for c, out in dimension.columns.items()),
        status.alias(dimension.status_column),
        F.col("_t._lsn").alias(dimension.version_column),
    )


def join_timeline_of_rows(
    events: pa.Table, segments: pa.Table, dimension: Dimension, time_column: str = "event_time"
) -> pa.Table:
    """join_timeline of rows on the driver (a micro-batch's few events, a timeline collected
    once per history version): the same rows as Arrow, in `events`' order, without a Spark
    job. Kept equal to it by tests/unit/transforms/test_as_of.py."""
    import pyarrow as pa
    import pyarrow.compute as pc

    key, at = dimension.event_key, events[time_column]
    place = pa.array(range(events.num_rows), pa.int64())
    candidates = pa.table({"_key": events[key], "_at": at, "_place": place}).join(
        segments, "_key", join_type="inner"
    )
    start, end, when = candidates["seg_from"], candidates["seg_to"], candidates["_at"]
    # As the join's condition: a null comparison holds nowhere.
    holds = pc.and_kleene(
        pc.or_kleene(pc.is_null(start), pc.less_equal(start, when)),
        pc.or_kleene(pc.is_null(end), pc.less(when, end)),
    )
    found = candidates.filter(holds)
    # Each event's segment (null where none holds): an event falls in at most one.
    taken = found.take(pc.index_in(place, value_set=found["_place"]))
    status = pc.if_else(
        pc.is_null(events[key]),
        NO_KEY,
        pc.if_else(pc.is_null(taken["_status"]), UNKNOWN, taken["_status"]),
    )
    added = {out: taken[f"_d_{c}"] for c, out in dimension.columns.items()}
    added |= {dimension.status_column: status, dimension.version_column: taken["_lsn"]}
    joined = events
    for name, column in added.items():
        joined = joined.append_column(name, column)
    return joined
