"""The verdict of a data_quality run of bronze, checked against the same snapshot counted
independently with plain Spark: the run succeeds when no FAIL check is broken, and fails,
naming every broken check in its one ERROR line, when one is (the services' bronze may well
hold a defect that earlier runs left). Either way its log links the Data Docs, on disk."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lakehouse.core.config import Settings
from lakehouse.core.delta_io import read_table
from lakehouse.core.tables import table
from lakehouse.core.times import from_micros
from tests.integration import airflow_client as af

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DAG_ID = "data_quality"
BRONZE_COLUMNS = ["topic", "partition", "offset", "kafka_timestamp"]
# lakehouse.quality.suites.bronze_events_raw_suite: its checks that only warn.
BRONZE_WARN_CHECKS = {"key_not_null"}


def assert_bronze_verdict(
    api: af.Api, spark: SparkSession, settings: Settings, run_id: str
) -> None:
    run, tis = af.wait_for_run(api, DAG_ID, run_id, timeout=0)  # it has ended
    logs = af.task_logs(api, DAG_ID, run_id, tis)
    report = af.tasks_report(tis, logs, lines=40)
    log = logs["validate"]
    docs = re.findall(r"Data Docs: (\S+index\.html)", log)
    assert docs, f"no Data Docs line in the log:\n{report}"
    assert Path(docs[-1]).is_file(), docs[-1]

    recorded = _recorded(spark, settings, run_id)
    expected = _failures(spark, settings, recorded)
    assert recorded["failures"] == expected, f"the suite and an independent count disagree\n{log}"
    fail_checks = sorted(set(expected) - BRONZE_WARN_CHECKS)
    if not fail_checks:
        assert run["state"] == "success", report
        assert recorded["verdict"] in ("passed", "warned")
        return
    assert run["state"] == "failed", report
    assert recorded["verdict"] == "failed"
    assert [ti["try_number"] for ti in tis] == [1], "a broken FAIL check is not retried"
    [failure] = af.error_lines(api, DAG_ID, run_id, "validate")
    assert failure.startswith("Task exited data quality: FAIL checks broke:"), failure
    for check in fail_checks:
        assert f"bronze.events_raw: {check}: BROKEN -> fail" in failure, failure
    assert f"Data Docs: {docs[-1]}" in failure


def _recorded(spark: SparkSession, settings: Settings, run_id: str) -> dict[str, Any]:
    """The run's dq.quality_runs row, with its range as aware datetimes."""
    runs = read_table(spark, table("dq.quality_runs"), settings)
    [row] = (
        runs.where(runs["run_id"] == run_id)
        .selectExpr(
            "table_name",
            "table_version",
            "verdict",
            "failures",
            "unix_micros(range_start) AS start",
            "unix_micros(range_end) AS end",
        )
        .collect()
    )
    assert row["table_name"] == "bronze.events_raw"
    return {**row.asDict(), "start": from_micros(row["start"]), "end": from_micros(row["end"])}


def _failures(spark: SparkSession, settings: Settings, run: dict[str, Any]) -> dict[str, int]:
    """The bronze suite's row-counting checks, counted with plain Spark on the same rows."""
    from pyspark.sql import functions as F

    bronze = (
        spark.read.format("delta")
        .option("versionAsOf", run["table_version"])
        .load(table("bronze.events_raw").path(settings))
    )
    rows = bronze.where(
        (F.col("kafka_timestamp") >= F.lit(run["start"]))
        & (F.col("kafka_timestamp") < F.lit(run["end"]))
    )
    coordinates = ["topic", "partition", "offset"]
    [[duplicated]] = (
        rows.groupBy(*coordinates).count().where("count > 1").agg(F.sum("count")).collect()
    )
    [nulls] = rows.select(
        *[F.sum(F.col(c).isNull().cast("int")).alias(f"{c}_not_null") for c in BRONZE_COLUMNS],
        F.sum(F.col("key").isNull().cast("int")).alias("key_not_null"),
        F.sum((F.col("partition") < 0).cast("int")).alias("partition_not_negative"),
        F.sum((F.col("offset") < 0).cast("int")).alias("offset_not_negative"),
    ).collect()
    counts = {**nulls.asDict(), "topic_partition_offset_unique": duplicated}
    return {check: int(n) for check, n in counts.items() if n}
