"""Migrating bronze tables written with string key/value to bytes: nothing lost, once."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from pyspark.sql import functions as F

from lakehouse.batch.recompute import Interval, recompute_interval
from lakehouse.core.config import Settings
from lakehouse.core.delta_io import read_table_at, table_version
from lakehouse.core.frames import rows_frame
from lakehouse.core.tables import table
from lakehouse.ops import migrate
from lakehouse.ops.migrate import (
    ALREADY_BINARY,
    MIGRATED,
    MISSING,
    MigrationError,
    NotMigratedError,
)

RAW = table("bronze.events_raw")
AT = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
# What bronze held as strings, as bytes: the last value is not UTF-8 (Latin-1 "été").
SENT = [(b"u1", b'{"page": "/"}'), (b"u2", b'{"page": "/\xe9t\xe9"}'), (None, b"")]


def write_string_bronze(spark, settings: Settings) -> None:
    """bronze.events_raw as the speed layer wrote it before: key and value as strings (Spark
    stores a string's bytes as they are, valid UTF-8 or not), by a stream's exactly-once
    append (transaction id speed:q, batch 0)."""
    rows = [(k, v, "events", 0, i, AT, AT) for i, (k, v) in enumerate(SENT)]
    raw = rows_frame(spark, rows, RAW.schema)
    old = raw.withColumns({c: F.col(c).cast("string") for c in ("key", "value")})
    (
        old.write.format("delta")
        .option("txnAppId", "speed:q")
        .option("txnVersion", 0)
        .option("delta.checkpointInterval", RAW.checkpoint_interval)
        .save(RAW.path(settings))
    )


def stored(spark, settings: Settings, version: int) -> list[tuple]:
    df = read_table_at(spark, RAW, settings, version)
    assert df is not None
    as_bytes = df.withColumns({c: F.col(c).cast("binary") for c in ("key", "value")})
    rows = as_bytes.orderBy("offset").collect()
    return [(r["key"] and bytes(r["key"]), bytes(r["value"]) if r["value"] else b"") for r in rows]


def properties(spark, settings: Settings) -> dict:
    [row] = spark.sql(f"DESCRIBE DETAIL delta.`{RAW.path(settings)}`").collect()
    return dict(row["properties"])


def test_a_string_table_becomes_bytes_with_every_byte_kept_once(
    spark, local_settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_string_bronze(spark, local_settings)
    kept = properties(spark, local_settings)
    # Its writer refuses to start on it (its first append of bytes would fail), and the batch
    # layer to recompute from it.
    with pytest.raises(NotMigratedError, match="run `make migrate-bronze`"):
        migrate.require_bytes(spark, local_settings, [RAW])
    interval = Interval.checked(AT, AT + timedelta(hours=1), datetime.now(UTC))
    with pytest.raises(NotMigratedError, match="run `make migrate-bronze`"):
        recompute_interval(spark, local_settings, interval, "r")

    # A rewrite whose digest differs from the version read is undone, and said so.
    with monkeypatch.context() as patched:
        digests = iter(["3:1:2:3:4", "3:1:2:3:5"])
        patched.setattr(migrate, "rows_digest", lambda _: next(digests))
        with pytest.raises(MigrationError, match="version 0 restored"):
            migrate.migrate_to_bytes(spark, local_settings, RAW)
    assert table_version(spark, RAW, local_settings) == 2  # the rewrite, then its restore
    assert stored(spark, local_settings, 2) == SENT

    done = migrate.migrate_to_bytes(spark, local_settings, RAW)
    assert (done.status, done.rows, done.read_version, done.version) == (MIGRATED, 3, 2, 3)
    after = read_table_at(spark, RAW, local_settings, 3)
    assert after is not None
    types = {f.name: f.dataType.simpleString() for f in after.schema}
    assert (types["key"], types["value"]) == ("binary", "binary")
    assert stored(spark, local_settings, 3) == SENT
    assert properties(spark, local_settings) == kept

    again = migrate.migrate_to_bytes(spark, local_settings, RAW)
    assert (again.status, again.version) == (ALREADY_BINARY, 3)
    assert table_version(spark, RAW, local_settings) == 3, "a second run changes nothing"
    migrate.require_bytes(spark, local_settings, [RAW])

    # The stream's batch 0, replayed after the migration, is still skipped: exactly-once holds.
    rows = rows_frame(spark, [(b"u9", b"{}", "events", 0, 9, AT, AT)], RAW.schema)
    rows.write.format("delta").mode("append").option("txnAppId", "speed:q").option(
        "txnVersion", 0
    ).save(RAW.path(local_settings))
    assert table_version(spark, RAW, local_settings) == 3


def test_a_missing_table_is_reported_not_created(spark, local_settings) -> None:
    done = migrate.migrate_to_bytes(spark, local_settings, RAW)
    assert done.status == MISSING and "nothing to migrate" in done.describe()
    assert table_version(spark, RAW, local_settings) is None
