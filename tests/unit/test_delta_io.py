"""Delta writes on tiny local tables."""

from __future__ import annotations

from dataclasses import replace

from lakehouse.delta_io import append_once, compact_small_files
from lakehouse.tables import table


def test_compaction_rewrites_the_small_files_and_leaves_the_large_ones_alone(
    spark, local_settings
) -> None:
    from pyspark.sql import functions as F

    target = replace(table("speed.late_events"), name="tests.compacted")
    # One file that is large next to the bound below, then four small ones.
    append_once(
        spark.range(20_000)
        .select("id", F.sha2(F.col("id").cast("string"), 256).alias("pad"))
        .coalesce(1),
        target,
        local_settings,
        "t",
        0,
    )
    path = target.path(local_settings)
    [large] = spark.read.format("delta").load(path).inputFiles()
    for version in range(1, 5):
        append_once(
            spark.range(version * 100, version * 100 + 3).select("id", F.lit("x").alias("pad")),
            target,
            local_settings,
            "t",
            version,
        )
    before = spark.read.format("delta").load(path).orderBy("id").collect()

    compact_small_files(spark, target, local_settings, small_file_bytes=100_000)

    files = spark.read.format("delta").load(path).inputFiles()
    assert large in files
    assert len(files) == 2
    assert spark.read.format("delta").load(path).orderBy("id").collect() == before
