"""Make the Spark driver's class archive (`make setup` runs it with the venv's Python):

    python -m infra.spark.class_archive [--where]

A driver JVM that starts with it maps the classes of Spark, Delta and their libraries from
one file instead of reading and verifying them from the jars (lakehouse.core.spark.
class_archive). To make it, a driver runs the kinds of work our jobs do on a tiny Delta table
in a temporary folder, and the JDK writes every class it loaded when it exits.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from lakehouse.core.config import load_settings
from lakehouse.core.paths import spark_jars_dir
from lakehouse.core.spark import class_archive, driver_java_options, get_spark


def load_classes(folder: Path, archive: Path) -> None:
    """Start a driver that writes `archive` at exit, do the work, and wait for that exit."""
    from delta.tables import DeltaTable
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    env = {k: v for k, v in os.environ.items() if not k.startswith("TRIBUTARY")}
    env |= {"TRIBUTARY__STORAGE__ROOT": str(folder / "lakehouse")}
    settings = load_settings(profile="local", environ=env)
    spark = get_spark("class-archive", settings, java_options=driver_java_options(archive, True))
    table, copy = str(folder / "table"), str(folder / "copy")
    rows = spark.createDataFrame(
        [(1, "a", "2026-01-01 10:00:00"), (2, "b", "2026-01-01 10:01:30")],
        "id long, page string, at string",
    ).withColumn("at", F.to_timestamp("at"))
    rows.write.format("delta").partitionBy("page").save(table)
    (
        DeltaTable.forPath(spark, table)
        .alias("t")
        .merge(rows.alias("s"), "t.id = s.id")
        .whenMatchedUpdateAll()
        .whenNotMatchedInsertAll()
        .execute()
    )
    read = spark.read.format("delta").load(table)
    read.groupBy(F.window("at", "1 minute"), "page").agg(F.count("*"), F.sum("id")).collect()
    read.withColumn("n", F.row_number().over(Window.partitionBy("page").orderBy("at"))).collect()
    spark.readStream.format("delta").load(table).writeStream.format("delta").option(
        "checkpointLocation", str(folder / "checkpoint")
    ).trigger(availableNow=True).start(copy).awaitTermination()
    spark.sql(f"OPTIMIZE delta.`{table}`").collect()
    spark.sql(f"VACUUM delta.`{table}` RETAIN 168 HOURS").collect()
    DeltaTable.forPath(spark, table).history(5).collect()
    jvm = spark.sparkContext._gateway.proc  # type: ignore[union-attr]
    spark.stop()
    jvm.stdin.close()  # the gateway JVM exits when its input ends, and writes the archive
    jvm.wait(timeout=300)


def main(argv: list[str]) -> int:
    archive = class_archive(spark_jars_dir())
    if argv == ["--where"]:
        print(archive)
        return 0
    if archive.exists():
        return 0
    archive.parent.mkdir(parents=True, exist_ok=True)
    partial = archive.with_name(archive.name + ".partial")
    partial.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="tributary-class-archive-") as folder:
        load_classes(Path(folder), partial)
    if not partial.exists():
        print("the JVM wrote no class archive", file=sys.stderr)
        return 1
    partial.replace(archive)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
