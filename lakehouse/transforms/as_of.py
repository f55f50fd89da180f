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
    [key] = dimension.table.key
    event_key, at = F.col(f"_e.{dimension.event_key}"), F.col(f"_e.{time_column}")
    versions = history.select(
        F.col(key).alias("_key"),
        "valid_from",
        "valid_to",
        F.col("lsn").alias("_lsn"),
        *(F.col(c).alias(f"_d_{c}") for c in dimension.columns),
    ).alias("_v")
    holds = (
        (event_key == F.col("_v._key"))
        & (F.col("_v.valid_from") <= at)
        & (F.col("_v.valid_to").isNull() | (at < F.col("_v.valid_to")))
    )
    # A dimension's history is small beside the events: sent to every task, not shuffled.
    candidates = events.alias("_e").join(F.broadcast(versions), holds, "left")
    latest = Window.partitionBy(F.col(f"_e.{identity}")).orderBy(F.col("_v._lsn").desc_nulls_last())
    chosen = candidates.withColumn("_pick", F.row_number().over(latest)).where("_pick = 1")

    first_from = history.groupBy(F.col(key).alias("_key")).agg(
        F.min("valid_from").alias("_first_from")
    )
    judged = chosen.select("_e.*", "_v._lsn", *(f"_v._d_{c}" for c in dimension.columns)).join(
        F.broadcast(first_from).alias("_f"), F.col(dimension.event_key) == F.col("_f._key"), "left"
    )
    status = (
        F.when(F.col(dimension.event_key).isNull(), F.lit(NO_KEY))
        .when(F.col("_lsn").isNotNull(), F.lit(MATCHED))
        .when(F.col("_first_from").isNull(), F.lit(UNKNOWN))
        .when(F.col(time_column) < F.col("_first_from"), F.lit(NOT_YET))
        .otherwise(F.lit(DELETED))
    )
    return judged.select(
        *(F.col(f"`{c}`") for c in events.columns),
        *(F.col(f"_d_{c}").alias(out) for c, out in dimension.columns.items()),
        status.alias(dimension.status_column),
        F.col("_lsn").alias(dimension.version_column),
    )
