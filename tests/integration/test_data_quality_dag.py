"""The data_quality DAG, run for real by the running Airflow on the services' lakehouse (the
local profile's in the tests' own state folder, with whatever earlier tests left in it).

Its bronze.events_raw is validated whole, and the verdict is checked against the same
snapshot counted independently here: the run succeeds when no FAIL check is broken, and
fails, naming every broken check, when one is (the services' bronze may well hold a defect
that earlier runs left). Either way the log links the Data Docs, which exist on disk.
"""

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
RUN_TIMEOUT = 600
WHOLE_TABLE = "2000-01-01T00:00:00Z"
BRONZE_COLUMNS = ["topic", "partition", "offset", "kafka_timestamp"]
# lakehouse.quality.suites.bronze_events_raw_suite: its checks that count rows, and actions.
BRONZE_WARN_CHECKS = {"key_not_null"}


def test_bronze_is_validated_and_the_data_docs_linked(
    api: af.Api, spark: SparkSession, services_settings: Settings
) -> None:
    af.wait_parsed(api, DAG_ID)
    with af.unpaused(api, DAG_ID):
        run = af.trigger_run(api, DAG_ID, conf={"layer": "bronze", "start": WHOLE_TABLE})
        run, tis = af.wait_for_run(api, DAG_ID, run["dag_run_id"], RUN_TIMEOUT)
    run_id = run["dag_run_id"]
    logs = af.task_logs(api, DAG_ID, run_id, tis)
    report = af.tasks_report(tis, logs, lines=40)
    assert run["state"] in af.FINAL_STATES, f"run {run_id} is still {run['state']}:\n{report}"
    log = logs["validate"]

    docs = re.findall(r"Data Docs: (\S+index\.html)", log)
    assert docs, f"no Data Docs line in the log:\n{report}"
    assert Path(docs[-1]).is_file(), docs[-1]
    url, page = af.results_page(api, DAG_ID, run_id, "validate")
    assert url.endswith("/index.html") and "Data Docs" in page, url

    recorded = _recorded(spark, services_settings, run_id)
    expected = _failures(spark, services_settings, recorded)
    assert recorded["failures"] == expected, f"the suite and an independent count disagree\n{log}"
    fail_checks = sorted(set(expected) - BRONZE_WARN_CHECKS)
    if not fail_checks:
        assert run["state"] == "success", report
        assert recorded["verdict"] in ("passed", "warned")
        return
    assert run["state"] == "failed", report
    assert recorded["verdict"] == "failed"
    assert [ti["try_number"] for ti in tis] == [1], "a broken FAIL check is not retried"
    [ti] = tis
    [failure] = af.error_lines(api, DAG_ID, run_id, ti["task_id"])
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
