"""The windowed joins' judge: each join's stream output against the same join (the stream's
own functions, lakehouse.joins.windowed.JoinQuery.join) over the static input tables.

Spark's rules, and how the judge follows them from ops.join_progress:

- Which batch read an input row: each batch's row records the Delta source offsets it read up
  to ({reservoirVersion: v, index: -1}: every commit before v). A row first present in its
  table at the version a batch read through was read by that batch (the table is read as of
  each such version, by key). Rows no batch has read yet are not judged.
- Late: a row is dropped by Spark when its event time is at or before the watermark of the
  batch before the one that read it (the first batch drops nothing). Per batch, the rows so
  found late must be exactly the rows Spark says it dropped (dropped_by_watermark).
- The stream's output must then equal the batch join over the on-time rows, row for row (as
  multisets). Every pair of the full batch join that the stream lacks involves a late row.
- Open: a placed order without a payment is emitted once the watermark passes its window; an
  order unpaid in the batch join that the stream has not emitted is explained as open when
  placed_at + window is not before the last batch's watermark (a payment could still come).

Anything else is a difference: the first ones are printed by jobs.stream_joins_reconcile.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F

from lakehouse.core.config import Settings
from lakehouse.core.delta_io import read_table, table_exists
from lakehouse.core.frames import rows_frame
from lakehouse.joins.windowed import QUERIES, JoinQuery, Side

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

EXAMPLES = 5
READ_BATCH = "_read_batch"


class UndecidableError(Exception):
    """The progress rows do not say which batch read some input rows (a batch without its
    progress row, a batch that ended inside a commit): lateness cannot be decided."""


@dataclass(frozen=True)
class JoinVerdict:
    query: str
    batch_id: int | None  # the last batch judged; None: the query has run no batch
    watermark: datetime | None  # the last batch's watermark
    compared: int = 0  # rows the stream and the on-time batch join hold together
    differing: int = 0
    late: dict[str, int] = field(default_factory=dict)  # late rows per side
    not_emitted_for_late: int = 0  # pairs of the full batch join that involve a late row
    open_orders: int = 0  # unpaid orders whose window the watermark has not passed
    examples: list[str] = field(default_factory=list)

    @property
    def equal(self) -> bool:
        return self.batch_id is not None and self.differing == 0


def reconcile_windowed_joins(
    spark: SparkSession, settings: Settings, queries: tuple[JoinQuery, ...] = QUERIES
) -> list[JoinVerdict]:
    """Each join (the live ones, or a replay version's: windowed.queries_of) against the batch
    join of its on-time input rows."""
    return [reconcile_join(spark, settings, query) for query in queries]


def reconcile_join(spark: SparkSession, settings: Settings, query: JoinQuery) -> JoinVerdict:
    progress = progress_of(spark, settings, query)
    if not progress:
        return JoinVerdict(query.name, None, None)
    last = max(progress)
    watermarks = {batch: row["watermark_micros"] for batch, row in progress.items()}
    final_time = progress[last]["watermark"]
    problems: list[str] = []
    sides: dict[str, tuple[DataFrame, DataFrame]] = {}  # side -> (all read rows, on-time rows)
    late_counts: dict[str, int] = {}
    dropped_found: dict[int, int] = {}
    for side in (query.left, query.right):
        try:
            read = rows_read(spark, settings, side, progress)
        except UndecidableError as err:
            return JoinVerdict(query.name, last, final_time, differing=1, examples=[str(err)])
        late_at = F.col(side.time) <= F.timestamp_micros(F.col("_late_watermark"))
        # Evaluated once: it reads one version of the table per batch, and every count below
        # would read them all again.
        marked = read.join(_late_watermarks(spark, watermarks), READ_BATCH, "left")
        marked = marked.localCheckpoint()
        late = marked.where(late_at)
        on_time = marked.where(~late_at | F.col("_late_watermark").isNull())
        columns = [c for c in read.columns if c != READ_BATCH]
        sides[side.name] = (marked.select(*columns), on_time.select(*columns))
        per_batch = _side_late_per_batch(late, side, columns)
        late_counts[side.name] = sum(per_batch.values())
        for batch, count in per_batch.items():
            dropped_found[batch] = dropped_found.get(batch, 0) + count
    for batch, row in sorted(progress.items()):
        if (row["dropped_by_watermark"] or 0) != dropped_found.get(batch, 0):
            problems.append(
                f"batch {batch}: Spark dropped {row['dropped_by_watermark']} rows as late, the "
                f"recorded watermarks explain {dropped_found.get(batch, 0)}"
            )
    left_all, left_on_time = sides[query.left.name]
    right_all, right_on_time = sides[query.right.name]
    expected = query.join(left_on_time, right_on_time, settings, False).localCheckpoint()
    full = query.join(left_all, right_all, settings, False)
    stream = _stream_output(spark, settings, query, last).select(*expected.columns)
    missing = expected.exceptAll(stream).localCheckpoint()
    extra = stream.exceptAll(expected).localCheckpoint()
    open_orders = 0
    final_watermark = watermarks[last]
    if "paid" in expected.columns and final_watermark is not None:
        window = timedelta(seconds=query.window(settings))
        still_open = ~F.col("paid") & (
            F.col("placed_at") + F.expr(f"INTERVAL {int(window.total_seconds())} SECONDS")
            >= F.timestamp_micros(F.lit(final_watermark))
        )
        open_orders = missing.where(still_open).count()
        missing = missing.where(~still_open)
    examples = [f"missing from the stream: {_shown(r)}" for r in missing.limit(EXAMPLES).collect()]
    examples += [f"not in the batch join: {_shown(r)}" for r in extra.limit(EXAMPLES).collect()]
    differing = missing.count() + extra.count() + len(problems)
    return JoinVerdict(
        query=query.name,
        batch_id=last,
        watermark=final_time,
        compared=expected.count() + extra.count(),
        differing=differing,
        late=late_counts,
        not_emitted_for_late=full.exceptAll(expected).count(),
        open_orders=open_orders,
        examples=(problems + examples)[: 2 * EXAMPLES],
    )


def _side_late_per_batch(late: DataFrame, side: Side, columns: list[str]) -> dict[int, int]:
    """Late rows per reading batch, counted as Spark counts them: the side's input rows (its
    selection, e.g. only the purchases), batch by batch (the selection keeps only its own
    columns; batches with late rows are few)."""
    counts: dict[int, int] = {}
    for row in late.select(READ_BATCH).distinct().collect():
        batch = int(row[READ_BATCH])
        count = side.select(late.where(F.col(READ_BATCH) == batch).select(*columns)).count()
        if count:
            counts[batch] = count
    return counts


def _late_watermarks(spark: SparkSession, watermarks: dict[int, int | None]) -> DataFrame:
    """(batch, the watermark a row it read must be after, in microseconds): the watermark of
    the batch before."""
    rows = [(batch, watermarks.get(batch - 1)) for batch in watermarks]
    return rows_frame(spark, rows, f"{READ_BATCH} bigint, _late_watermark bigint")


def _stream_output(
    spark: SparkSession, settings: Settings, query: JoinQuery, last: int
) -> DataFrame:
    """The stream's output rows up to batch `last` (a batch only writes when it emits)."""
    if not table_exists(spark, query.output, settings):
        return rows_frame(spark, [], query.output.spark_schema()).drop("batch_id")
    rows = read_table(spark, query.output, settings)
    return rows.where(F.col("batch_id") <= last).drop("batch_id")


def _shown(row: Any) -> str:
    return json.dumps(row.asDict(), default=str, sort_keys=True)


def progress_of(spark: SparkSession, settings: Settings, query: JoinQuery) -> dict[int, Any]:
    """batch id -> its ops.join_progress row, for the query's current checkpoint (the writer
    id of its newest row)."""
    if not table_exists(spark, query.progress, settings):
        return {}
    rows = (
        read_table(spark, query.progress, settings)
        .where(F.col("query") == query.name)
        .withColumn("watermark_micros", F.unix_micros("watermark"))
    )
    newest = rows.orderBy(F.desc("processed_at")).select("app_id").first()
    if newest is None:
        return {}
    found: dict[int, Any] = {}
    for row in rows.where(F.col("app_id") == newest["app_id"]).collect():
        found.setdefault(int(row["batch_id"]), row)
    return found


def read_through(progress: dict[int, Any], side: Side, settings: Settings) -> dict[int, int]:
    """batch id -> the last version of the side's table that the batch had read completely,
    for the batches that read something of it."""
    through: dict[int, int] = {}
    for batch in sorted(progress):
        row = progress[batch]
        offsets = [
            s
            for s in json.loads(row["sources"])
            if _same_path(s.get("description") or "", side.source.path(settings))
        ]
        if not offsets:
            raise UndecidableError(f"batch {batch} of {row['query']} names no {side.source.name}")
        ends = {json.dumps(s["endOffset"], sort_keys=True) for s in offsets}
        starts = {json.dumps(s["startOffset"], sort_keys=True) for s in offsets}
        if len(ends) != 1:
            raise UndecidableError(
                f"batch {batch}: the two streams of {side.source.name} read to different offsets"
            )
        if ends == starts:
            continue  # read nothing
        end = offsets[0]["endOffset"]
        if int(end["index"]) != -1:
            raise UndecidableError(
                f"batch {batch} ended inside version {end['reservoirVersion']} of "
                f"{side.source.name}: its rows cannot be assigned to a batch"
            )
        through[batch] = int(end["reservoirVersion"]) - 1
    batches = sorted(progress)
    gaps = [b for b in range(batches[0], batches[-1] + 1) if b not in progress]
    if gaps or batches[0] != 0:
        raise UndecidableError(
            f"batches without a progress row: {gaps or list(range(batches[0]))[:10]}"
        )
    return through


def _same_path(description: str, path: str) -> bool:
    """A Delta source's description (DeltaSource[file:/x/y]) names the table at `path`."""
    inner = description.removeprefix("DeltaSource[").removesuffix("]")
    return inner.removeprefix("file:").rstrip("/") == path.removeprefix("file:").rstrip("/")


def rows_read(
    spark: SparkSession, settings: Settings, side: Side, progress: dict[int, Any]
) -> DataFrame:
    """The side's source rows that a batch has read, each with the batch (READ_BATCH)."""
    through = read_through(progress, side, settings)
    path = side.source.path(settings)
    firsts: DataFrame | None = None
    for batch, version in sorted(through.items()):
        keys = (
            spark.read.format("delta")
            .option("versionAsOf", version)
            .load(path)
            .select(side.key, F.lit(batch).cast("bigint").alias(READ_BATCH))
        )
        firsts = keys if firsts is None else firsts.unionByName(keys)
    current = read_table(spark, side.source, settings)
    if firsts is None:
        return current.withColumn(READ_BATCH, F.lit(None).cast("bigint")).limit(0)
    first_batch = firsts.groupBy(side.key).agg(F.min(READ_BATCH).alias(READ_BATCH))
    return current.join(first_batch, side.key, "inner")
