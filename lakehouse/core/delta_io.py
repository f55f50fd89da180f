"""Reading and writing: the Kafka source and Delta tables. Jobs never build paths themselves."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Callable, Collection
from datetime import datetime
from typing import TYPE_CHECKING, Any

from lakehouse.core.checkpoints import checkpoint_query_id
from lakehouse.core.config import Settings
from lakehouse.core.frames import rows_arrow, rows_frame
from lakehouse.core.spark import HOW_TO_RUN
from lakehouse.core.tables import Table
from lakehouse.core.times import from_micros

if TYPE_CHECKING:
    import pyarrow as pa
    from delta.tables import DeltaMergeBuilder
    from pyspark.sql import DataFrame, DataFrameWriter, SparkSession
    from pyspark.sql.streaming import StreamingQuery


def read_kafka_stream(
    spark: SparkSession,
    settings: Settings,
    topic: str | None = None,
    starting_offsets: str = "earliest",
    max_offsets_per_trigger: int | None = None,
    fail_on_data_loss: bool = True,
) -> DataFrame:
    """`topic`: one topic, or several separated by commas. `fail_on_data_loss`: a deleted
    offset stops the job loudly, never skipping data silently; only a reader of compacted
    topics, where offsets are missing by design, turns it off."""
    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", settings.kafka.bootstrap_servers)
        .option("subscribe", topic or settings.kafka.topic)
        .option("startingOffsets", starting_offsets)
        .option("failOnDataLoss", str(fail_on_data_loss).lower())
        .option("minPartitions", settings.kafka.min_read_tasks)
    )
    if max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", max_offsets_per_trigger)
    return reader.load()


def append_stream_available_now(
    df: DataFrame, table: Table, query: str, settings: Settings
) -> StreamingQuery:
    """Process everything available now into a Delta table, exactly once (checkpointed)."""
    return (
        df.writeStream.format("delta")
        .outputMode("append")
        .queryName(f"{table.name}.{query}")
        .option("checkpointLocation", table.checkpoint(query, settings))
        .trigger(availableNow=True)
        .start(table.path(settings))
    )


def each_new_chunk(
    spark: SparkSession,
    source: Table,
    settings: Settings,
    consumer: Table,
    process: Callable[[DataFrame, str, int], None],
) -> None:
    """Run `process(rows, query_id, chunk_id)` on the rows appended to `source` since the last
    call for `consumer` (all of them the first time), chunk by chunk in commit order, each
    chunk once (a checkpoint beside `consumer`, whose id is `query_id`: chunk ids start again
    from 0 with a new one); return when caught up. Commits that only rearrange files
    (compaction) bring no rows."""
    checkpoint = consumer.checkpoint(f"from-{source.name}", settings)

    def run(rows: DataFrame, chunk_id: int) -> None:
        process(rows, checkpoint_query_id(spark, checkpoint), chunk_id)

    _each_chunk(appended_rows(spark, source, settings), checkpoint, run)


def each_chunk_appended_after(
    spark: SparkSession,
    source: Table,
    settings: Settings,
    version: int,
    process: Callable[[DataFrame, int], None],
) -> bool:
    """Run `process(rows, chunk_id)` on the rows appended to `source` after `version`, chunk
    by chunk in commit order, remembering nothing (a throwaway checkpoint); return when caught
    up. False if a commit since changed rows instead of adding them (a rewrite, a delete), or
    the log no longer holds `version`'s successors: the rows processed are then not all."""
    from pyspark.errors import StreamingQueryException

    checkpoint = tempfile.mkdtemp(prefix=f"tributary-after-{version}-")
    try:
        rows = appended_rows(spark, source, settings, {"startingVersion": str(version + 1)})
        _each_chunk(rows, checkpoint, process)
    except StreamingQueryException:
        return False
    finally:
        shutil.rmtree(checkpoint, ignore_errors=True)
    return True


def appended_rows(
    spark: SparkSession, source: Table, settings: Settings, options: dict[str, str] | None = None
) -> DataFrame:
    """The Delta stream source: the rows each commit adds; commits that only rearrange files
    (compaction) bring none, and one that changes rows fails the query."""
    reader = spark.readStream.format("delta").options(**(options or {}))
    return reader.load(source.path(settings)).drop(*source.layout_names)


def _each_chunk(
    rows: DataFrame, checkpoint: str, process: Callable[[DataFrame, int], None]
) -> None:
    query = (
        rows.writeStream.foreachBatch(process)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()


def delete_folder(spark: SparkSession, path: str) -> None:
    """Delete a folder (a table, a checkpoint) on local disk or S3 alike, through Hadoop's file
    system."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    hadoop_path = jvm.org.apache.hadoop.fs.Path(path)
    fs = hadoop_path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    fs.delete(hadoop_path, True)


def read_table(spark: SparkSession, table: Table, settings: Settings) -> DataFrame:
    """The table's rows as readers see them: no layout columns, and a table of partial view
    rows (Table.partials_of) combined into the view's rows."""
    return as_read(spark.read.format("delta").load(table.path(settings)), table)


def as_read(stored: DataFrame, table: Table) -> DataFrame:
    """A table's stored rows -> its rows as readers see them (read_table)."""
    rows = stored.drop(*table.layout_names)
    if table.partials_of is None:
        return rows
    from lakehouse.transforms.views import view

    return view(table.partials_of).combine(rows).select(*table.spark_schema().fieldNames())


def with_layout(df: DataFrame, table: Table, only: Collection[str] | None = None) -> DataFrame:
    """`df` with the table's layout columns added (Table.layout_columns); with `only`, just
    those named in it (a table created before its layout has none, and keeps it that way)."""
    from pyspark.sql import functions as F

    return df.withColumns(
        {
            name: F.expr(expression)
            for name, expression in table.layout_columns
            if only is None or name in only
        }
    )


def table_exists(spark: SparkSession, table: Table, settings: Settings) -> bool:
    from delta.tables import DeltaTable

    return bool(DeltaTable.isDeltaTable(spark, table.path(settings)))


def stored_layout(spark: SparkSession, table: Table, settings: Settings) -> tuple[str, ...]:
    """The layout columns the table is written with: all of them for a table not created yet,
    none for one an earlier release created before it had any (its partitioning cannot
    change)."""
    if not table_exists(spark, table, settings):
        return table.layout_names
    stored = spark.read.format("delta").load(table.path(settings)).columns
    return tuple(name for name in table.layout_names if name in stored)


# --- idempotent writes (exactly-once per writer and batch) --------------------------------
#
# A write that may be made again (a micro-batch replayed after a crash, a task retried) carries
# (the writer's identity, a version): Delta's transaction id (txnAppId, txnVersion), which Delta
# records and checks itself (append_once, merge_once), or for a stream's appends a mark it looks
# for (append_batch). Either way nothing is applied twice.

TXN_APP_ID = "spark.databricks.delta.write.txnAppId"
TXN_VERSION = "spark.databricks.delta.write.txnVersion"
# The userMetadata of the session's next commits (a MERGE takes no write options).
COMMIT_METADATA = "spark.databricks.delta.commitInfo.userMetadata"


def small_frame(spark: SparkSession, rows: list[Any], table: Table) -> DataFrame:
    """A few rows for `table` (tuples in its columns' order, or dicts), built on the driver,
    as one partition. Spark slices local rows across the
    cores, and a write of a slice without rows leaves an empty file that no commit adds
    (Delta 4.4): one per progress row, every micro-batch, until a vacuum lists the folder."""
    return rows_frame(spark, rows, table.spark_schema()).coalesce(1)


class SchemaMismatchError(Exception):
    """A writer's rows lack columns its table declares, or have others (lakehouse.core.tables)."""


def conformed(df: DataFrame, table: Table) -> DataFrame:
    """`df` with the columns `table` declares, in the registry's order, once their names and
    types match it: a table is created, and appended to, only with its declared schema."""
    declared = {f.name: f.dataType.simpleString() for f in table.spark_schema().fields}
    given = {f.name: f.dataType.simpleString() for f in df.schema.fields}
    if given != declared:
        missing = [f"{n} {t}" for n, t in declared.items() if given.get(n) != t]
        extra = [f"{n} {t}" for n, t in given.items() if declared.get(n) != t]
        raise SchemaMismatchError(
            f"rows for {table.name} do not match its declared schema: missing "
            f"{', '.join(missing) or 'nothing'}; not declared {', '.join(extra) or 'nothing'}"
        )
    return df.select(*(f"`{name}`" for name in declared))


def append_once(
    df: DataFrame,
    table: Table,
    settings: Settings,
    app_id: str,
    version: int,
    layout: Collection[str] | None = None,
) -> None:
    """Append `df` once per (app_id, version), by Delta's transaction id. `layout`: only these
    of the table's layout columns (stored_layout)."""
    appender(df, table, layout).option("txnAppId", app_id).option("txnVersion", version).save(
        table.path(settings)
    )


def append_batch(
    df: DataFrame,
    table: Table,
    settings: Settings,
    app_id: str,
    batch_id: int,
    layout: Collection[str] | None = None,
    untried: bool = False,
) -> None:
    """A stream's append of micro-batch `batch_id`, once per (app_id, batch_id).

    The commit is marked with the pair in its userMetadata. `untried`: the stream knows no
    earlier try of the batch can have written (it committed the batch before it and has not
    begun this one), so the append is made without looking: Delta's check of a transaction id
    rebuilds the table's state from its log, most of a small append's time. Any other append
    first looks for its mark among the table's latest commits, and also carries the
    transaction id, which Delta checks, for what the stream committed before marks."""
    writer = appender(df, table, layout).option("userMetadata", batch_mark(app_id, batch_id))
    if not untried:
        if marked_by(df.sparkSession, table, settings, app_id, batch_id):
            return
        writer = writer.option("txnAppId", app_id).option("txnVersion", batch_id)
    writer.save(table.path(settings))


def append_rows_batch(
    spark: SparkSession,
    rows: list[dict[str, Any]],
    table: Table,
    settings: Settings,
    app_id: str,
    batch_id: int,
    untried: bool = False,
) -> None:
    """append_batch of a few rows built in Python (a progress row). An untried batch's rows
    go to a table that exists through delta-rs (small_tables.append_marked), without a Spark
    job; a retry looks for its mark through Spark, as append_batch does."""
    arrow = rows_arrow(rows, table.spark_schema())
    append_arrow_batch(spark, arrow, table, settings, app_id, batch_id, untried)


def append_arrow_batch(
    spark: SparkSession,
    rows: pa.Table,
    table: Table,
    settings: Settings,
    app_id: str,
    batch_id: int,
    untried: bool = False,
) -> None:
    """append_rows_batch of rows on the driver as Arrow, in the table's columns and its
    partition columns' values (a table created without them, or through Spark, does without)."""
    from lakehouse.core.small_tables import append_marked

    if untried and append_marked(settings, table, lambda partitioned: rows, app_id, batch_id):
        return
    struct = table.spark_schema()
    frame = spark.createDataFrame(rows.select(struct.fieldNames()), struct).coalesce(1)
    append_batch(frame, table, settings, app_id, batch_id, untried=untried)


def append_small_batch(
    df: DataFrame,
    table: Table,
    settings: Settings,
    app_id: str,
    batch_id: int,
    untried: bool,
    layout: Collection[str] | None = None,
    rows: int | None = None,
    size_bytes: int | None = None,
) -> None:
    """append_batch of a frame of a few rows (a view's partial rows; `rows` of them and
    `size_bytes` at most, if known): for an untried batch and a table that exists, collected
    to the driver and committed by delta-rs (small_tables.append_marked), with the layout
    columns the table is partitioned by; Spark still computes the rows. More than
    `speed.delta_rs_append_rows` rows or `speed.delta_rs_append_mb` MiB go through Spark's
    distributed write. `layout`: as append_batch's, for an append through Spark."""
    from lakehouse.core.small_tables import append_marked

    def arrow(partitioned: tuple[str, ...]) -> pa.Table:
        laid_out = [name for name in table.layout_names if name in partitioned]
        return with_layout(conformed(df, table), table, only=laid_out).toArrow()

    speed = settings.speed
    few = (rows is None or rows <= speed.delta_rs_append_rows) and (
        size_bytes is None or size_bytes <= speed.delta_rs_append_mb << 20
    )
    if untried and few and append_marked(settings, table, arrow, app_id, batch_id):
        return
    append_batch(df, table, settings, app_id, batch_id, layout, untried=untried)


# A table's one writer commits at most a few times per batch (its append, a compaction or a
# fold, a vacuum's start and end): a retried batch's mark, if it was committed, is among the
# last commits. The search stops at the first of the writer's marks it meets.
MARK_SEARCH_COMMITS = 64
MARK_PREFIX = "tributary-batch "


def batch_mark(app_id: str, batch_id: int) -> str:
    return f"{MARK_PREFIX}{json.dumps({'app': app_id, 'batch': batch_id})}"


def last_mark(
    spark: SparkSession, table: Table, settings: Settings, app_id: str
) -> tuple[int, int] | None:
    """(version, batch id) of app_id's newest marked write among the table's latest commits,
    or None."""
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    if not table_exists(spark, table, settings):
        return None
    history = DeltaTable.forPath(spark, table.path(settings)).history(MARK_SEARCH_COMMITS)
    for row in history.select("version", "userMetadata").orderBy(F.desc("version")).collect():
        meta = row["userMetadata"] or ""
        if meta.startswith(MARK_PREFIX):
            mark = json.loads(meta.removeprefix(MARK_PREFIX))
            if mark["app"] == app_id:
                return int(row["version"]), int(mark["batch"])
    return None


def marked_by(
    spark: SparkSession, table: Table, settings: Settings, app_id: str, batch_id: int
) -> bool:
    """Whether the table's latest commits hold a write of (app_id, batch_id) or of a later
    batch of app_id: as with Delta's transaction ids, a batch not newer than the writer's last
    is one already written."""
    mark = last_mark(spark, table, settings, app_id)
    return mark is not None and mark[1] >= batch_id


def marked_version(
    spark: SparkSession, table: Table, settings: Settings, app_id: str, batch_id: int
) -> int | None:
    """The version of the table that holds (app_id, batch_id)'s mark (a first try of the
    batch committed it), or None. Looked for among the latest commits, down to the writer's
    first other mark."""
    mark = last_mark(spark, table, settings, app_id)
    return mark[0] if mark is not None and mark[1] == batch_id else None


def read_before_batch(
    spark: SparkSession,
    table: Table,
    settings: Settings,
    app_id: str,
    batch_id: int,
    untried: bool = False,
) -> DataFrame:
    """The table as the batch before (app_id, batch_id) left it, whether or not a first try
    of the batch committed its marked write (no rows yet: none). A retried batch decides from
    what its first try read, so it counts and writes as that try did. `untried`: no earlier
    try can have written (append_batch), so the latest version is read without looking."""
    version = None if untried else marked_version(spark, table, settings, app_id, batch_id)
    if version is None:
        if table_exists(spark, table, settings):
            return read_table(spark, table, settings)
    elif version > 0:
        earlier = read_table_at(spark, table, settings, version - 1)
        assert earlier is not None
        return earlier
    return rows_frame(spark, [], table.spark_schema())


def append_new(df: DataFrame, table: Table, settings: Settings) -> None:
    """Append rows the caller knows no earlier write holds, with no transaction id: Delta's
    check of one (append_once) rebuilds the table's state from its log, most of a small
    append's time."""
    appender(df, table).save(table.path(settings))


def appender(df: DataFrame, table: Table, layout: Collection[str] | None = None) -> DataFrameWriter:
    """The append of `df` to `table`, but for where: its declared columns, layout (`layout`:
    only those layout columns) and settings."""
    laid_out = table.layout_names if layout is None else tuple(layout)
    writer = (
        with_layout(conformed(df, table), table, only=laid_out)
        .write.format("delta")
        .mode("append")
        # A table created before its declaration gained a column takes it on: the rows
        # conform to the declaration, so nothing else can change its schema this way.
        .option("mergeSchema", "true")
    )
    partition_columns = (*table.partition_by, *laid_out)
    if partition_columns:
        writer = writer.partitionBy(*partition_columns)
    if table.checkpoint_interval:
        # Applied when this write creates the table; Delta ignores it on later appends.
        writer = writer.option("delta.checkpointInterval", table.checkpoint_interval)
    if table.stats_columns:
        writer = writer.option("delta.dataSkippingStatsColumns", ",".join(table.stats_columns))
    return writer


def merge_once(
    source: DataFrame,
    table: Table,
    settings: Settings,
    app_id: str,
    version: int,
    build_merge: Callable[[DeltaMergeBuilder], DeltaMergeBuilder],
    on: str,
    mark: bool = False,
) -> None:
    """MERGE `source` into `table` (alias t; source alias s) once per (app_id, version).

    The first write of a table creates it from the rows to insert, under the same
    transaction id, so creation is exactly-once too. `mark`: the commit also carries
    (app_id, version) as a batch mark, for read_before_batch; only for a table no other write
    of the same app marks (append_batch would take this batch's mark for its own).
    """
    from delta.tables import DeltaTable

    metadata = batch_mark(app_id, version) if mark else None
    if not table_exists(source.sparkSession, table, settings):
        writer = appender(source, table).option("txnAppId", app_id).option("txnVersion", version)
        if metadata is not None:
            writer = writer.option("userMetadata", metadata)
        writer.save(table.path(settings))
        return
    # The transaction id of a MERGE can only be given as session settings; a session of its
    # own keeps them from leaking into writes that other threads run at the same time.
    session = source.sparkSession.newSession()
    for key in HOW_TO_RUN:
        value = source.sparkSession.conf.get(key, None)
        if value is not None:
            session.conf.set(key, value)
    session.conf.set(TXN_APP_ID, app_id)
    session.conf.set(TXN_VERSION, str(version))
    if metadata is not None:
        session.conf.set(COMMIT_METADATA, metadata)
    target = DeltaTable.forPath(session, table.path(settings))
    build_merge(target.alias("t").merge(with_layout(source, table).alias("s"), on)).execute()


def table_created_at(spark: SparkSession, table: Table, settings: Settings) -> datetime:
    """When the table was created (its first commit)."""
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    detail = DeltaTable.forPath(spark, table.path(settings)).detail()
    [[micros]] = detail.select(F.unix_micros("createdAt")).collect()
    return from_micros(micros)


def table_version(spark: SparkSession, table: Table, settings: Settings) -> int | None:
    """The table's latest version, or None if it does not exist yet."""
    from delta.tables import DeltaTable

    if not table_exists(spark, table, settings):
        return None
    [row] = DeltaTable.forPath(spark, table.path(settings)).history(1).collect()
    return int(row["version"])


def read_table_at(
    spark: SparkSession, table: Table, settings: Settings, version: int | None
) -> DataFrame | None:
    """The table as it was at `version` (None: the table did not exist then)."""
    if version is None:
        return None
    stored = spark.read.format("delta").option("versionAsOf", version).load(table.path(settings))
    return as_read(stored, table)


def delta_rs_location(settings: Settings, path: str) -> tuple[str, dict[str, str] | None]:
    """The URI and storage options delta-rs needs for a table path from the registry."""
    if not path.startswith("s3a://"):
        return path.removeprefix("file://"), None
    s3 = settings.s3
    if s3.access_key is None or s3.secret_key is None:
        raise ValueError("no S3 credentials: run `make setup` to generate them")
    options = {
        "AWS_ENDPOINT_URL": s3.endpoint,
        "AWS_ACCESS_KEY_ID": s3.access_key.get_secret_value(),
        "AWS_SECRET_ACCESS_KEY": s3.secret_key.get_secret_value(),
        "AWS_REGION": s3.region,
        "AWS_ALLOW_HTTP": "true",
    }
    return "s3://" + path.removeprefix("s3a://"), options


class WrongWriterError(Exception):
    """A job tried to write a table another job owns (one writer per table set)."""


def overwrite_where(
    df: DataFrame, table: Table, settings: Settings, writer: str, condition: str
) -> int:
    """Replace exactly the rows matching `condition` with `df`, in one Delta commit; returns
    the table's new version. Rows of `df` outside `condition` make Delta refuse the write, so
    a job can never spill into a neighbour's rows."""
    if table.writer != writer:
        raise WrongWriterError(f"{writer} may not write {table.name}: its writer is {table.writer}")
    writer_ = (
        with_layout(conformed(df, table), table)
        .write.format("delta")
        .mode("overwrite")
        .option("replaceWhere", condition)
    )
    if table.partition_columns:
        writer_ = writer_.partitionBy(*table.partition_columns)
    writer_.save(table.path(settings))
    version = table_version(df.sparkSession, table, settings)
    assert version is not None
    return version
