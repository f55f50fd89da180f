"""Reading and writing: the Kafka source and Delta tables. Jobs never build paths themselves."""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import TYPE_CHECKING

from lakehouse.config import Settings
from lakehouse.spark import PROJECTIONS
from lakehouse.tables import Table

if TYPE_CHECKING:
    from delta.tables import DeltaMergeBuilder
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery


def read_kafka_stream(
    spark: SparkSession,
    settings: Settings,
    topic: str | None = None,
    starting_offsets: str = "earliest",
    max_offsets_per_trigger: int | None = None,
) -> DataFrame:
    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", settings.kafka.bootstrap_servers)
        .option("subscribe", topic or settings.kafka.topic)
        .option("startingOffsets", starting_offsets)
        # A deleted or compacted offset must stop the job loudly, never skip data silently.
        .option("failOnDataLoss", "true")
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


def read_table(spark: SparkSession, table: Table, settings: Settings) -> DataFrame:
    return spark.read.format("delta").load(table.path(settings)).drop(*table.layout_names)


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


# --- idempotent writes (DESIGN.md: exactly-once through Delta transaction ids) -------------
#
# Every write of a micro-batch carries (txnAppId, txnVersion) = (the writer's identity, the
# batch id). Delta records the pair in the commit and skips any later write whose version is
# not newer, so a batch that is replayed after a crash cannot apply anything twice.

TXN_APP_ID = "spark.databricks.delta.write.txnAppId"
TXN_VERSION = "spark.databricks.delta.write.txnVersion"


def append_once(df: DataFrame, table: Table, settings: Settings, app_id: str, version: int) -> None:
    writer = (
        with_layout(df, table)
        .write.format("delta")
        .mode("append")
        .option("txnAppId", app_id)
        .option("txnVersion", version)
    )
    if table.partition_columns:
        writer = writer.partitionBy(*table.partition_columns)
    if table.checkpoint_interval:
        # Applied when this write creates the table; Delta ignores it on later appends.
        writer = writer.option("delta.checkpointInterval", table.checkpoint_interval)
    if table.stats_columns:
        writer = writer.option("delta.dataSkippingStatsColumns", ",".join(table.stats_columns))
    writer.save(table.path(settings))


def merge_once(
    source: DataFrame,
    table: Table,
    settings: Settings,
    app_id: str,
    version: int,
    build_merge: Callable[[DeltaMergeBuilder], DeltaMergeBuilder],
    on: str,
) -> None:
    """MERGE `source` into `table` (alias t; source alias s) once per (app_id, version).

    The first write of a table creates it from the rows to insert, under the same
    transaction id, so creation is exactly-once too.
    """
    from delta.tables import DeltaTable

    if not table_exists(source.sparkSession, table, settings):
        append_once(source, table, settings, app_id, version)
        return
    # The transaction id of a MERGE can only be given as session settings; a session of its
    # own keeps them from leaking into writes that other threads run at the same time.
    session = source.sparkSession.newSession()
    # A new session starts from the application's settings: carry over how to run.
    projections = source.sparkSession.conf.get(PROJECTIONS, None)
    if projections is not None:
        session.conf.set(PROJECTIONS, projections)
    session.conf.set(TXN_APP_ID, app_id)
    session.conf.set(TXN_VERSION, str(version))
    target = DeltaTable.forPath(session, table.path(settings))
    source = with_layout(source, table, only=target.toDF().columns)
    build_merge(target.alias("t").merge(source.alias("s"), on)).execute()


# OPTIMIZE leaves files of at least this size alone (Delta's setting; its default is 1 GB).
OPTIMIZE_MIN_FILE_SIZE = "spark.databricks.delta.optimize.minFileSize"


def compact_small_files(
    spark: SparkSession, table: Table, settings: Settings, small_file_bytes: int
) -> None:
    """Rewrite the table's files smaller than `small_file_bytes` into larger ones (OPTIMIZE).

    Files at or above the bound are never read again, so one compaction rewrites at most about
    that much plus what was added since the last one, however old the table is. Readers are
    not disturbed (a new version with the same rows); only the table's writer may call this.
    """
    from delta.tables import DeltaTable

    # A session of its own: the setting must not reach other writes, and neither may a MERGE's
    # transaction id reach this commit.
    session = spark.newSession()
    session.conf.set(OPTIMIZE_MIN_FILE_SIZE, str(small_file_bytes))
    DeltaTable.forPath(session, table.path(settings)).optimize().executeCompaction()


# Delta refuses a retention under its default (7 days) unless this is off: the stream's
# configured `vacuum_after_hours` is the decision, validated where it is loaded.
RETENTION_CHECK = "spark.databricks.delta.retentionDurationCheck.enabled"


def vacuum_replaced_files(
    spark: SparkSession, table: Table, settings: Settings, after_hours: int
) -> None:
    """Delete the table's files that a newer version replaced (a MERGE, a compaction) at least
    `after_hours` ago. Versions older than that can no longer be read (time travel).

    LITE: the files to delete are found in the transaction log since the last vacuum, not by
    listing the table's folder, which grows with the table; FULL (the listing) only where the
    log no longer accounts for every file (Delta says so).
    """
    session = spark.newSession()
    session.conf.set(RETENTION_CHECK, "false")
    statement = f"VACUUM delta.`{table.path(settings)}` RETAIN {after_hours} HOURS"
    try:
        session.sql(f"{statement} LITE").collect()
    except Exception as err:
        if "DELTA_CANNOT_VACUUM_LITE" not in str(err):
            raise
        session.sql(f"{statement} FULL").collect()


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
    return (
        spark.read.format("delta")
        .option("versionAsOf", version)
        .load(table.path(settings))
        .drop(*table.layout_names)
    )


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
    """A job tried to write a table another job owns (DESIGN.md, invariant 5)."""


def overwrite_where(
    df: DataFrame, table: Table, settings: Settings, writer: str, condition: str
) -> int:
    """Replace exactly the rows matching `condition` with `df`, in one Delta commit; returns
    the table's new version. Rows of `df` outside `condition` make Delta refuse the write, so
    a job can never spill into a neighbour's rows."""
    if table.writer != writer:
        raise WrongWriterError(f"{writer} may not write {table.name}: its writer is {table.writer}")
    writer_ = (
        with_layout(df, table)
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
