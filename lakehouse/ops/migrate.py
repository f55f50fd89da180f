"""Bronze as bytes: tables written while `key` and `value` were strings, rewritten as BINARY.

Bronze is the master dataset, so nothing may be lost: a table is rewritten in one atomic
overwrite commit from the version read, and that commit is trusted only once the new version
holds the same rows and the same bytes: the same count and the same order-independent digest
(sums of each row's SHA-256 over every column, key and value as bytes). A check that fails
restores the version read (Delta RESTORE) and says so. A table whose key and value are
bytes already is left as it is, and said to be.

The rewrite keeps what the stream's exactly-once writes rely on: Delta carries every writer's
last transaction id (txnAppId, txnVersion) across an overwrite, so a micro-batch replayed
after the migration is still skipped. The table's writer lock is held throughout: the stream
(or the replay) that writes the table must be stopped, and cannot start until it is done.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lakehouse.core.config import Settings
from lakehouse.core.delta_io import conformed, read_table_at, table_exists, table_version
from lakehouse.core.locks import exclusive_writer
from lakehouse.core.storage import StorageError
from lakehouse.core.tables import Table, table

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

BYTES_COLUMNS = ("key", "value")
# The live bronze tables; replay versions' quarantine tables are found (tables_to_migrate).
BRONZE = ("bronze.events_raw", "bronze.quarantine")

MIGRATED, ALREADY_BINARY, MISSING = "migrated", "already_binary", "missing"


class MigrationError(Exception):
    """A table cannot be migrated, or its rewrite did not hold what it read (then restored)."""


class NotMigratedError(StorageError):
    """A table its writer appends bytes to still holds key and value as strings."""


class MigrationRefused(Exception):
    """The request names a table with no bytes to migrate, or one that does not exist: nothing
    changed."""


@dataclass(frozen=True)
class Migration:
    """What migrating one table did."""

    table: str
    status: str  # MIGRATED, ALREADY_BINARY or MISSING
    path: str
    rows: int | None = None
    read_version: int | None = None  # the version rewritten
    version: int | None = None  # the version the rewrite committed
    digest: str | None = None  # of the rows, the same before and after

    def describe(self) -> str:
        if self.status == MISSING:
            return f"{self.table}: no table at {self.path}: nothing to migrate"
        if self.status == ALREADY_BINARY:
            return (
                f"{self.table}: key and value are bytes already (version {self.version}): unchanged"
            )
        return (
            f"{self.table}: {self.rows} rows rewritten with key and value as bytes, version "
            f"{self.read_version} -> {self.version}; rows and bytes checked identical "
            f"(digest {self.digest})"
        )


def tables_to_migrate(spark: SparkSession, settings: Settings) -> list[Table]:
    """The live bronze tables and every replay version's quarantine table."""
    from lakehouse.replay.versions import list_versions, outputs_of

    found = [table(name) for name in BRONZE]
    if table_exists(spark, table("ops.replay_versions"), settings):
        found += [outputs_of(v.version).quarantine for v in list_versions(settings)]
    return found


def tables_named(names: Sequence[str]) -> list[Table]:
    """The tables `names` ask for: bronze.events_raw, bronze.quarantine or
    replay_<version>.quarantine (MigrationRefused for any other)."""
    from lakehouse.speed.outputs import SpeedOutputs

    found = []
    for name in names:
        stage, _, rest = name.partition(".")
        if name in BRONZE:
            found.append(table(name))
        elif stage.startswith("replay_") and rest == "quarantine":
            found.append(SpeedOutputs.replay(stage.removeprefix("replay_")).quarantine)
        else:
            raise MigrationRefused(
                f"{name} is not a table with bytes to migrate ({', '.join(BRONZE)}, "
                "replay_<version>.quarantine); nothing changed"
            )
    return found


def migrate_bronze(
    spark: SparkSession,
    settings: Settings,
    names: Sequence[str] = (),
    on_line: Callable[[str], None] = print,
) -> list[Migration]:
    """Migrate the tables `names` ask for (by default, tables_to_migrate), one by one, saying
    each outcome as it comes. Refused before anything changes when a table named, or
    bronze.events_raw by default, does not exist."""
    named = tables_named(names)
    required = named or [table(BRONZE[0])]
    for target in required:
        if not table_exists(spark, target, settings):
            raise MigrationRefused(
                f"{target.name}: no table at {target.path(settings)} (is this the profile the "
                "lakehouse is on?); nothing changed"
            )
    done = []
    for target in named or tables_to_migrate(spark, settings):
        done.append(migrate_to_bytes(spark, settings, target))
        on_line(f"    {done[-1].describe()}")
    return done


def require_bytes(spark: SparkSession, settings: Settings, tables: Iterable[Table | None]) -> None:
    """Refuse (NotMigratedError) to write to, or recompute from, a table written before key
    and value were bytes: Delta would refuse the first append, after the writer had started,
    and parsing reads bytes."""
    from delta.tables import DeltaTable

    for t in tables:
        if t is None or not table_exists(spark, t, settings):
            continue
        schema = DeltaTable.forPath(spark, t.path(settings)).toDF().schema
        if any(schema[c].dataType.simpleString() == "string" for c in BYTES_COLUMNS):
            raise NotMigratedError(
                f"{t.name} holds key and value as strings (written before bronze kept bytes): "
                "run `make migrate-bronze` (tributary migrate-bronze) with its writer stopped"
            )


def rows_digest(df: DataFrame) -> str:
    """`count:sum1:...:sum4` over `df`'s rows, whatever their order: each row's SHA-256 over
    every column (key and value as their bytes, a string column's bytes as stored), its four
    60-bit pieces summed apart."""
    from pyspark.sql import functions as F

    def cell(name: str) -> Column:
        column = F.col(f"`{name}`")
        return F.sha2(column.cast("binary"), 256) if name in BYTES_COLUMNS else column

    row = F.sha2(F.to_json(F.struct(*(cell(c).alias(c) for c in df.columns))), 256)
    pieces = [
        F.sum(F.conv(F.substring(row, 1 + 15 * i, 15), 16, 10).cast("decimal(38,0)"))
        for i in range(4)
    ]
    [found] = df.agg(F.count(F.lit(1)), *pieces).collect()
    return ":".join(str(value or 0) for value in found)


def migrate_to_bytes(spark: SparkSession, settings: Settings, target: Table) -> Migration:
    """Rewrite `target` with key and value as BINARY, checked (module doc); holds its
    writer's lock (lakehouse.core.locks.WriterBusyError if its writer runs)."""
    path = target.path(settings)
    with exclusive_writer(settings, target.writer):
        read_version = table_version(spark, target, settings)
        if read_version is None:
            return Migration(target.name, MISSING, path)
        current = read_table_at(spark, target, settings, read_version)
        assert current is not None
        kinds = {f.name: f.dataType.simpleString() for f in current.schema.fields}
        given = {c: kinds.get(c) for c in BYTES_COLUMNS}
        if all(kind == "binary" for kind in given.values()):
            return Migration(target.name, ALREADY_BINARY, path, version=read_version)
        if any(kind not in ("string", "binary") for kind in given.values()):
            raise MigrationError(f"{target.name}: key and value are {given}, not text or bytes")
        before = rows_digest(current)
        rewritten = conformed(
            current.withColumns({c: current[c].cast("binary") for c in BYTES_COLUMNS}), target
        )
        writer = rewritten.write.format("delta").mode("overwrite").option("overwriteSchema", "true")
        if target.partition_columns:
            writer = writer.partitionBy(*target.partition_columns)
        writer.save(path)
        version = table_version(spark, target, settings)
        assert version is not None
        after = read_table_at(spark, target, settings, version)
        assert after is not None
        after_digest = rows_digest(after)
        if version != read_version + 1 or after_digest != before:
            _restore(spark, path, read_version)
            raise MigrationError(
                f"{target.name}: the rewrite (version {version}) does not hold what version "
                f"{read_version} held (digest {after_digest} against {before}); version "
                f"{read_version} restored"
            )
    rows = int(before.split(":", 1)[0])
    return Migration(target.name, MIGRATED, path, rows, read_version, version, before)


def _restore(spark: SparkSession, path: str, version: int) -> None:
    from delta.tables import DeltaTable

    DeltaTable.forPath(spark, path).restoreToVersion(version)
