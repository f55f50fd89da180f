"""Debezium change records -> bronze changes, current rows and type-2 history.

A record of a changelog topic (Debezium's PostgreSQL connector, JSON without schemas) has the
row's primary key as its key, `{"user_id": "u0001"}`, and the change envelope as its value:
`{"before": {...}|null, "after": {...}|null, "source": {"lsn", "txId", "ts_ms", "snapshot",
...}, "op": "c"|"u"|"r"|"d", ...}`. After a delete comes a tombstone: the same key, no value.

- `parse_changes` reads every record once and gives it its quarantine `reasons` (none for a
  good one); `accepted_changes` are bronze.<table>_changes (tombstones too: they are part of
  the log) and `quarantined_changes` bronze.cdc_quarantine. Every record is in exactly one.
- `typed_rows` turns a table's changes into row changes: the row image (`after`, or `before`
  for a delete) cast to the table's columns, with the change's position. Tombstones are not
  changes of a row: they only let Kafka compact the key away, and are not applied.
- Commit order: a key's changes are applied in LSN order (offset only breaks ties). Debezium
  writes changes in commit order, but a restarted connector sends again what it had not
  confirmed, so arrival order is not commit order. PostgreSQL checks a primary key at once
  (the shop's keys are not DEFERRABLE), so at any LSN a key has at most one live row, and a
  key's LSN order is its commit order.
- A change is identified by its key and LSN (every change is a WAL record of its own; a
  snapshot reads each key once). A second delivery is a duplicate: the first one counts.
- A snapshot read ('r') is an insert. A primary key update arrives as a delete of the old key
  and a create of the new one (same LSN and transaction): two keys, each applied on its own.

The functions take static or per-batch DataFrames alike. All-at-once (`current_rows`,
`history_rows`) and incremental (`apply_changes`, `extend_history` over `unapplied_changes`)
give the same tables: the tests split random change sequences at random points to hold them
to it.
"""

from __future__ import annotations

from functools import reduce
from typing import TYPE_CHECKING

from pyspark.sql import Column, DataFrame, Window, WindowSpec
from pyspark.sql import functions as F

from lakehouse.core.events import (
    REASON_INVALID_UTF8,
    REASON_MALFORMED,
    REASON_MISSING,
    REASON_WRONG_TYPE,
)
from lakehouse.transforms.json_text import STRICT
from lakehouse.transforms.validate import quarantine_rows

if TYPE_CHECKING:
    from collections.abc import Mapping

    from lakehouse.cdc.shop import CapturedTable

# The envelope's fields parsing reads. A row image is kept as the JSON text it came as (a
# string field given a JSON object holds the object's text); typed_rows casts it per table.
ENVELOPE = (
    "struct<before: string, after: string, op: string, "
    "source: struct<lsn: bigint, txId: bigint, ts_ms: bigint, snapshot: string>, "
    "_corrupt: string>"
)
# from_json keeps the fields it read before a syntax error (partial results): the text of a
# record that is no JSON goes here, so a record cut short is malformed, not missing fields.
# Spark's leniencies off, as for click events (single quotes, NaN). What follows the envelope
# is not read: Kafka Connect writes one JSON value per record.
_CORRUPT = {"columnNameOfCorruptRecord": "_corrupt", "mode": "PERMISSIVE", **STRICT}
INSERTS = ("c", "u", "r")  # ops whose `after` is the row from then on
DELETE = "d"
OPS = (*INSERTS, DELETE)

# Quarantine reasons, in the order a record lists them.
REASON_MALFORMED_KEY = "malformed_key"  # no key, or not a JSON object with fields
REASON_MISSING_OP = f"{REASON_MISSING}:op"
REASON_MISSING_SOURCE = f"{REASON_MISSING}:source"
REASON_MISSING_LSN = f"{REASON_MISSING}:source.lsn"
REASON_BAD_OP = "invalid_value:op"  # e.g. a truncate ('t') or a logical message ('m')
# An insert, update or read without its row as a JSON object; a delete without its old row
# (the shop's tables have REPLICA IDENTITY FULL: a delete carries the whole row).
REASON_MISSING_AFTER = f"{REASON_MISSING}:after"
REASON_MISSING_BEFORE = f"{REASON_MISSING}:before"
REASON_KEY_MISMATCH = "key_mismatch"  # the key's columns differ from the row image's
REASONS = (
    REASON_INVALID_UTF8,
    REASON_MALFORMED,
    REASON_MALFORMED_KEY,
    REASON_MISSING_OP,
    REASON_MISSING_SOURCE,
    REASON_MISSING_LSN,
    REASON_BAD_OP,
    REASON_MISSING_AFTER,
    REASON_MISSING_BEFORE,
    REASON_KEY_MISMATCH,
)
# After them, one per column of the record's table whose value in the row image is there but
# is no value of the column's type ("a lot" for a price): applied, it would be a silent null.
REASON_WRONG_TYPE_OF = REASON_WRONG_TYPE + ":{column}"

# bronze.<table>_changes, in the registry's order.
CHANGE_COLUMNS = (
    "topic",
    "partition",
    "offset",
    "kafka_timestamp",
    "key",
    "value",
    "tombstone",
    "op",
    "lsn",
    "tx_id",
    "commit_time",
    "snapshot",
    "key_json",
    "before",
    "after",
    "ingested_at",
)
CURRENT_SOURCE_COLUMNS = ("lsn", "kafka_offset", "commit_time")
VERSION_COLUMNS = ("valid_from", "valid_to", "is_current", "deleted", "lsn", "ended_lsn")

_TEXT_MAP = "map<string,string>"


def _once(df: DataFrame, parsed: Column, name: str) -> DataFrame:
    """`df` with `parsed` as column `name`, computed once per row: exploding a one-element
    array is a barrier the optimizer does not inline the parse through into each reader of
    its fields (lakehouse.transforms.parse)."""
    return df.select("*", F.explode(F.array(parsed)).alias(name))


def parse_changes(raw: DataFrame, tables: Mapping[str, CapturedTable] | None = None) -> DataFrame:
    """Bronze rows of changelog topics (key, value, topic, partition, offset, kafka_timestamp,
    ingested_at) -> the same rows with what the envelope says (tombstone, op, lsn, tx_id,
    commit_time, snapshot, key_json, before, after) and `reasons`, the quarantine reasons in
    REASONS order (empty for a change or a tombstone that can be applied). `tables`, topic ->
    captured table, adds each value of a record of that topic that does not cast to its
    column's type (REASON_WRONG_TYPE_OF, in the table's column order)."""
    text = F.expr("try_validate_utf8(value)")
    key_json = F.expr("try_validate_utf8(key)")
    decoded = raw.withColumns({"_text": text, "key_json": key_json})
    parsed = _once(decoded, F.from_json("_text", ENVELOPE, _CORRUPT), "_envelope")
    envelope, source = F.col("_envelope"), F.col("_envelope.source")
    op = envelope["op"]
    fields = {
        "tombstone": F.col("value").isNull(),
        "op": op,
        "lsn": source["lsn"],
        "tx_id": source["txId"],
        "commit_time": F.timestamp_millis(source["ts_ms"]),
        "snapshot": source["snapshot"],
        "before": envelope["before"],
        "after": envelope["after"],
    }
    image = F.when(op == DELETE, envelope["before"]).when(op.isin(*INSERTS), envelope["after"])
    maps = {
        "_key": F.from_json("key_json", _TEXT_MAP),
        "_row": F.from_json(image, _TEXT_MAP),
    }
    judged = parsed.withColumns(fields).withColumns(maps)
    rules = _rules(envelope)
    checks = [F.when(rules[r], F.lit(r)) for r in REASONS] + _type_checks(tables or {})
    reasons = F.array_compact(F.array(*checks))
    return judged.withColumn("reasons", reasons).drop("_text", "_envelope", *maps)


def _rules(envelope: Column) -> dict[str, Column]:
    """Reason -> when a parsed record breaks that rule. A record whose value cannot be read
    has that one content reason; a tombstone has only its key to judge."""
    text, op, source = F.col("_text"), envelope["op"], envelope["source"]
    # from_json gives a struct of nulls both for text that is no JSON object and for an
    # object with none of the envelope's fields; only those rows are parsed again.
    fields = ("before", "after", "op", "source")
    none_found = reduce(Column.__and__, [envelope[f].isNull() for f in fields])
    is_object = envelope["_corrupt"].isNull() & ~(none_found & F.json_object_keys(text).isNull())
    readable = text.isNotNull() & is_object
    key, row = F.col("_key"), F.col("_row")
    key_agrees = F.forall(
        F.map_keys(key), lambda column: F.try_element_at(row, column).eqNullSafe(key[column])
    )
    return {
        REASON_INVALID_UTF8: F.col("value").isNotNull() & text.isNull(),
        REASON_MALFORMED: text.isNotNull() & ~is_object,
        REASON_MALFORMED_KEY: key.isNull() | (F.size(key) == 0),
        REASON_MISSING_OP: readable & op.isNull(),
        REASON_MISSING_SOURCE: readable & source.isNull(),
        REASON_MISSING_LSN: readable & source.isNotNull() & source["lsn"].isNull(),
        REASON_BAD_OP: readable & ~op.isin(*OPS),
        REASON_MISSING_AFTER: readable & op.isin(*INSERTS) & row.isNull(),
        REASON_MISSING_BEFORE: readable & (op == DELETE) & row.isNull(),
        REASON_KEY_MISMATCH: readable & (F.size(key) > 0) & row.isNotNull() & ~key_agrees,
    }


def _type_checks(tables: Mapping[str, CapturedTable]) -> list[Column]:
    """A reason per column of each topic's table, when the record's row image holds a value
    for it that typed_rows could not cast (the same text, the same cast)."""
    row = F.col("_row")
    return [
        F.when(
            (F.col("topic") == topic)
            & row[column].isNotNull()
            & row[column].try_cast(kind).isNull(),
            F.lit(REASON_WRONG_TYPE_OF.format(column=column)),
        )
        for topic, captured in tables.items()
        for column, kind in captured.columns
    ]


def accepted_changes(parsed: DataFrame) -> DataFrame:
    """Parsed records with no reason, tombstones included, as bronze.<table>_changes rows."""
    return parsed.where(F.size("reasons") == 0).select(*CHANGE_COLUMNS)


def quarantined_changes(parsed: DataFrame) -> DataFrame:
    """Parsed records with a reason, as bronze.cdc_quarantine rows: the record as received,
    its position and every reason."""
    broken = parsed.where(F.size("reasons") > 0)
    return quarantine_rows(broken, F.col("reasons"), F.array_join("reasons", "; "))


def typed_rows(changes: DataFrame, table: CapturedTable) -> DataFrame:
    """`table`'s bronze changes -> row changes: the table's columns, typed, from the row
    image (`after`; `before` for a delete), and the change's op, lsn, kafka_offset,
    commit_time, tx_id and `deletes` (true for a delete). Tombstones are left out. Every value
    casts: parse_changes quarantined the records with one that does not, so a null here was
    null in the database."""
    live = changes.where(~F.col("tombstone"))
    deletes = F.col("op") == DELETE
    image = F.when(deletes, F.col("before")).otherwise(F.col("after"))
    as_text = "struct<" + ", ".join(f"`{c}`: string" for c in table.column_names) + ">"
    parsed = _once(live, F.from_json(image, as_text), "_image")
    return parsed.select(
        *(F.col(f"_image.`{c}`").try_cast(kind).alias(c) for c, kind in table.columns),
        "op",
        "lsn",
        F.col("offset").alias("kafka_offset"),
        "commit_time",
        "tx_id",
        deletes.alias("deletes"),
    )


def _by_key(table: CapturedTable) -> WindowSpec:
    return Window.partitionBy(*table.key)


def _in_commit_order(table: CapturedTable) -> WindowSpec:
    return _by_key(table).orderBy("lsn", "kafka_offset")


def distinct_changes(rows: DataFrame, table: CapturedTable) -> DataFrame:
    """One row change per key and LSN: the first delivery (the lowest offset). A change
    delivered again, or read twice, is applied once."""
    first = F.row_number().over(Window.partitionBy(*table.key, "lsn").orderBy("kafka_offset"))
    return rows.withColumn("_delivery", first).where(F.col("_delivery") == 1).drop("_delivery")


def winning_changes(rows: DataFrame, table: CapturedTable) -> DataFrame:
    """Each key's last row change in commit order, duplicates dropped: what a batch leaves
    the key as. `deletes` says it removes the key; else its columns are the row. The MERGE
    source of current rows (apply_changes)."""
    distinct = distinct_changes(rows, table)
    position = F.struct("lsn", "kafka_offset")
    last = F.max(position).over(_by_key(table))
    return distinct.withColumn("_last", last).where(position == F.col("_last")).drop("_last")


def current_rows(rows: DataFrame, table: CapturedTable) -> DataFrame:
    """The table after all of `rows` (row changes): one row per key that its last change did
    not delete, with that change's position (silver.<table>_current)."""
    winners = winning_changes(rows, table)
    return winners.where(~F.col("deletes")).select(*table.column_names, *CURRENT_SOURCE_COLUMNS)


def apply_changes(current: DataFrame, rows: DataFrame, table: CapturedTable) -> DataFrame:
    """Current rows after a later batch of row changes: a key takes the batch's winning
    change (winning_changes) when that change is later in commit order than the row's own,
    and loses its row when that change deletes it. A change whose LSN the row already has is
    the same change delivered again: the row stays as it is, first delivery and all.

    A change older than a key's delete in an earlier batch would bring the key back (current
    rows keep no trace of deletes): the batch is first narrowed to unapplied_changes, which
    reads that trace from the history."""
    columns = (*table.column_names, *CURRENT_SOURCE_COLUMNS)
    kept = current.select(*columns, F.lit(False).alias("deletes"), F.lit(1).alias("_current"))
    batch = winning_changes(rows, table).select(*columns, "deletes", F.lit(0).alias("_current"))
    candidates = kept.unionByName(batch)
    position = F.struct("lsn", "_current")
    last = F.max(position).over(_by_key(table))
    winners = candidates.withColumn("_last", last).where(position == F.col("_last"))
    return winners.where(~F.col("deletes")).select(*columns)


def _same_row(columns: tuple[str, ...], order: WindowSpec) -> Column:
    """The row change's columns equal the previous row change's, nulls equal to nulls."""
    same = [F.col(c).eqNullSafe(F.lag(c).over(order)) for c in columns]
    return reduce(Column.__and__, same)


def _versions(rows: DataFrame, table: CapturedTable) -> DataFrame:
    """Distinct row changes (and open versions given as row changes) -> versions.

    Each insert, update or read opens a version, valid from its row's business clock; the next
    version's clock ends it (valid_to), or a delete does, at the delete's commit time: a
    DELETE sets no business clock, and the deleted row's own clock is the version's start, so
    the commit time is the one time there is for when the row stopped existing. A version
    ended by a delete is `deleted`; the last version of a key that still exists is
    `is_current` (valid_to null). A change that leaves every column as it was (a snapshot read
    again, an UPDATE that sets what is there) opens no version; a delete of a key with no open
    version ends nothing. `lsn` is the change that opened the version, `ended_lsn` the one
    that ended it."""
    order = _in_commit_order(table)
    previous_live = ~F.lag("deletes").over(order)
    repeats = ~F.col("deletes") & previous_live & _same_row(table.column_names, order)
    changed = rows.withColumn("_repeats", F.coalesce(repeats, F.lit(False))).where(
        ~F.col("_repeats")
    )
    following = F.lead(F.struct("deletes", table.clock, "commit_time", "lsn")).over(order)
    nxt = F.col("_next")
    valid_to = F.when(nxt["deletes"], nxt["commit_time"]).otherwise(nxt[table.clock])
    return (
        changed.withColumn("_next", following)
        .where(~F.col("deletes"))
        .select(
            *table.column_names,
            F.col(table.clock).alias("valid_from"),
            valid_to.alias("valid_to"),
            nxt.isNull().alias("is_current"),
            F.coalesce(nxt["deletes"], F.lit(False)).alias("deleted"),
            "lsn",
            nxt["lsn"].alias("ended_lsn"),
        )
    )


def history_rows(rows: DataFrame, table: CapturedTable) -> DataFrame:
    """The type-2 history of all of `rows` (row changes): one row per version, in the rules
    of _versions (silver.<table>_history). A version is identified by its key and `lsn`."""
    return _versions(distinct_changes(rows, table), table)


def unapplied_changes(rows: DataFrame, history: DataFrame, table: CapturedTable) -> DataFrame:
    """The row changes later in commit order than the last change `history` holds for their
    key: the one that ended its last version (a delete included), or opened it while it is
    open. The rest were applied: a redelivery, or a batch run again. (A change that opened no
    version, as it changed nothing, may pass while its version is open: it changes nothing
    again.)"""
    applied = F.coalesce("ended_lsn", "lsn")
    last = history.groupBy(*table.key).agg(F.max(applied).alias("_applied_lsn"))
    unseen = F.col("_applied_lsn").isNull() | (F.col("lsn") > F.col("_applied_lsn"))
    return rows.join(last, list(table.key), "left").where(unseen).drop("_applied_lsn")


def extend_history(history: DataFrame, rows: DataFrame, table: CapturedTable) -> DataFrame:
    """The history rows a later batch of row changes adds or rewrites: for every key with an
    unapplied change, its open version (now maybe ended) and the versions the batch opens.
    Upserted into `history` by key and `lsn` (apply_history), they give the history of all
    changes at once."""
    fresh = distinct_changes(unapplied_changes(rows, history, table), table)
    inputs = (*table.column_names, "lsn", "kafka_offset", "commit_time", "deletes")
    touched = fresh.select(*table.key).distinct()
    open_versions = (
        history.where(F.col("is_current"))
        .join(touched, list(table.key), "left_semi")
        .select(
            *table.column_names,
            "lsn",
            F.lit(None).cast("bigint").alias("kafka_offset"),
            F.lit(None).cast("timestamp").alias("commit_time"),
            F.lit(False).alias("deletes"),
        )
    )
    return _versions(open_versions.unionByName(fresh.select(*inputs)), table)


def apply_history(history: DataFrame, rows: DataFrame, table: CapturedTable) -> DataFrame:
    """`history` with a later batch of row changes applied: extend_history's rows in place of
    the versions they rewrite (what the stream's MERGE on key and `lsn` does)."""
    extension = extend_history(history, rows, table)
    identity = [*table.key, "lsn"]
    kept = history.join(extension.select(*identity), identity, "left_anti")
    return kept.unionByName(extension).select(*table.column_names, *VERSION_COLUMNS)
