"""Spark writes Delta tables on local disk and on MinIO (s3a); Spark and an independent
reader (delta-rs, the `deltalake` package) read back the same rows."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import pytest

from lakehouse.core.config import Settings
from lakehouse.core.delta_io import delta_rs_location, read_table
from lakehouse.core.frames import rows_frame
from lakehouse.core.tables import Table, table
from tests.jobs_in_process import RunJob

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ROWS = [(i, f"user-{i % 7}", round(i * 1.5, 2)) for i in range(500)]
PROBE = Table(
    name="tests.storage_probe",
    writer="tests",
    description="storage round trip",
    schema="id long, user_id string, amount double",
)


def write_and_check(spark: SparkSession, settings: Settings) -> None:
    from deltalake import DeltaTable

    frame = rows_frame(spark, ROWS, "id long, user_id string, amount double")
    frame.write.format("delta").mode("overwrite").save(PROBE.path(settings))
    frame.where("id < 100").write.format("delta").mode("append").save(PROBE.path(settings))

    by_spark = sorted(tuple(r) for r in read_table(spark, PROBE, settings).collect())
    expected = sorted(ROWS + [r for r in ROWS if r[0] < 100])
    assert by_spark == expected

    uri, options = delta_rs_location(settings, PROBE.path(settings))
    reader = DeltaTable(uri, storage_options=options)
    assert reader.version() == 1, "two commits: the overwrite and the append"
    table = reader.to_pyarrow_table()
    by_delta_rs = sorted(
        zip(
            table["id"].to_pylist(),
            table["user_id"].to_pylist(),
            table["amount"].to_pylist(),
            strict=True,
        )
    )
    assert by_delta_rs == expected


def test_delta_on_local_disk(spark: SparkSession, local_settings: Settings) -> None:
    write_and_check(spark, local_settings)


def test_delta_on_minio_through_s3a(
    spark: SparkSession, minio_settings: Settings, minio_up: str
) -> None:
    write_and_check(spark, minio_settings)
    # The objects really are in the bucket, not on some local fallback.
    from lakehouse.core.storage import s3_client

    prefix = PROBE.path(minio_settings).removeprefix(f"s3a://{minio_settings.s3.bucket}/")
    names = [
        o.object_name
        for o in s3_client(minio_settings).list_objects(
            minio_settings.s3.bucket, prefix=prefix + "/_delta_log/", recursive=True
        )
    ]
    assert any(n.endswith("00000000000000000001.json") for n in names), names


def test_a_stream_s_few_rows_reach_minio_through_delta_rs(
    spark: SparkSession, minio_settings: Settings, minio_up: str
) -> None:
    """An untried batch's progress row is committed by delta-rs (lakehouse.core.small_tables)
    on S3 as on local disk, after Spark created the table: Spark reads both rows and finds
    the second batch's mark, so its retry writes nothing."""
    from lakehouse.core.delta_io import append_rows_batch, marked_by

    target = replace(table("ops.enrichment_pins"), name="tests.minio_small_rows")
    at = datetime(2026, 3, 1, tzinfo=UTC)

    def append(batch_id: int, untried: bool) -> None:
        row = {"app_id": "t", "batch_id": batch_id, "versions": {"users": 1}, "pinned_at": at}
        append_rows_batch(spark, [row], target, minio_settings, "t", batch_id, untried)

    append(0, True)  # no table yet: Spark creates it
    append(1, True)
    append(1, False)  # the retry finds the mark
    path = target.path(minio_settings)
    history = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").orderBy("version").collect()
    assert [str(h["engineInfo"]).startswith("delta-rs") for h in history] == [False, True]
    assert marked_by(spark, target, minio_settings, "t", 1)
    stored = read_table(spark, target, minio_settings).orderBy("batch_id").collect()
    assert [(r["batch_id"], r["versions"]) for r in stored] == [(n, {"users": 1}) for n in (0, 1)]


def test_a_view_s_crowded_hour_is_folded_on_minio_through_delta_rs(
    spark: SparkSession, minio_settings: Settings, minio_up: str
) -> None:
    """The fold (delta_maintenance.fold_partials) on S3 as on local disk: delta-rs finds the hour of
    several files in the table's log and reads its rows (Spark scans no file of the table),
    and commits their combination; Spark reads the same rows after, the hour in one file."""
    from lakehouse.core.delta_maintenance import fold_partials, partitions_to_fold
    from lakehouse.core.small_tables import crowded_partitions
    from tests.delta_files import FOLDED, unmarked_commits, write_partial_counts

    target = replace(FOLDED, name="tests.minio_folded")
    write_partial_counts(spark, target, minio_settings, [(9, 1), (9, 2), (10, 5)])
    before = sorted(read_table(spark, target, minio_settings).collect())
    crowded, stored = partitions_to_fold(spark, target, minio_settings)
    assert crowded == [(("window_hour", "2026-03-01T09"),)]
    assert stored is not None and stored.inputFiles() == []

    fold_partials(spark, target, minio_settings)
    assert unmarked_commits(spark, target.path(minio_settings))[-1] == ("WRITE", "delta-rs")
    assert sorted(read_table(spark, target, minio_settings).collect()) == before
    assert crowded_partitions(minio_settings, target)[0] == []  # type: ignore[index]


def test_unknown_table_names_the_known_ones() -> None:
    from lakehouse.core.tables import UnknownTableError, table

    with pytest.raises(UnknownTableError, match=r"known tables: .*bronze\.events_raw"):
        table("bronze.nope")


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            {"TRIBUTARY__S3__ENDPOINT": "http://127.0.0.1:1"},  # nothing listens there
            "MinIO/S3 at http://127.0.0.1:1 is not reachable: start it with `make up`",
        ),
        (
            {"TRIBUTARY_S3_SECRET_KEY": "wrongwrongwrong"},
            "check the S3 credentials (TRIBUTARY_S3_ACCESS_KEY / TRIBUTARY_S3_SECRET_KEY",
        ),
    ],
    ids=["minio down", "wrong secret"],
)
def test_storage_that_cannot_be_used_is_one_line_from_a_job(
    minio_up: str, env: dict[str, str], message: str, run_job_here: RunJob
) -> None:
    run = run_job_here("jobs.versions", "list", TRIBUTARY_PROFILE="minio", **env)
    assert run.returncode == 1
    assert run.stderr.startswith("versions: MinIO/S3 at ") and message in run.stderr, run.stderr
    assert len(run.stderr.splitlines()) == 1, run.stderr
