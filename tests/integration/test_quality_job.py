"""`python -m jobs.quality` (run in the test's process) on a tiny lakehouse of its own (local
disk, a temporary folder): QUARANTINE checks route rows to dq.quality_quarantine with their
reasons, every validated table gets a row in dq.quality_runs, Data Docs are built, a rerun of
a run id writes nothing twice, and a broken FAIL check ends the run with status 4, naming the
check."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from jobs.contract import Exit
from lakehouse.core.config import Settings, load_settings
from lakehouse.core.delta_io import read_table
from lakehouse.core.frames import rows_frame
from lakehouse.core.tables import table
from lakehouse.quality.runs import QualityOutcome, QualityRequest, Validated, record
from lakehouse.quality.suites import Suite
from lakehouse.quality.validate import SuiteResult
from tests.jobs_in_process import Ran, RunJob

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

HOUR = timedelta(hours=1)
# Within the job's default range (the last 2 days), whatever the day the tests run.
ARRIVED = datetime.now(UTC).replace(microsecond=0) - HOUR

RAW = (
    "key binary, value binary, topic string, partition int, offset long, "
    "kafka_timestamp timestamp, ingested_at timestamp"
)
SILVER = (
    "event_id string, event_type string, user_id string, session_id string, page string, "
    "product_id string, amount decimal(18,2), event_time timestamp, sent_at timestamp, "
    "event_date date, kafka_partition int, kafka_offset long, kafka_timestamp timestamp, "
    "ingested_at timestamp, arrived_late boolean"
)


def silver(n: int, **changes: Any) -> tuple[Any, ...]:
    event_time = ARRIVED - timedelta(seconds=30)
    row: dict[str, Any] = {
        "event_id": f"e-{n}",
        "event_type": "purchase" if n % 2 else "click",
        "user_id": f"u{n}",
        "session_id": "s1",
        "page": "/",
        "product_id": "p1",
        "amount": Decimal("9.99") if n % 2 else None,
        "event_time": event_time,
        "sent_at": event_time + timedelta(seconds=1),
        "event_date": event_time.date(),
        "kafka_partition": 0,
        "kafka_offset": n,
        "kafka_timestamp": ARRIVED,
        "ingested_at": ARRIVED,
        "arrived_late": False,
    }
    row.update(changes)
    return tuple(row.values())


def raw(offset: int) -> tuple[Any, ...]:
    return (f"u{offset}".encode(), b"{}", "events", 0, offset, ARRIVED, ARRIVED)


def lakehouse(tmp: Path) -> Settings:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRIBUTARY")}
    env["TRIBUTARY__STORAGE__ROOT"] = str(tmp / "lakehouse")
    env["TRIBUTARY__STORAGE__CHECKPOINTS"] = str(tmp / "checkpoints")
    return load_settings(profile="local", environ=env)


def write(spark: SparkSession, settings: Settings, name: str, schema: str, *rows: tuple) -> None:
    target = table(name)
    writer = rows_frame(spark, list(rows), schema).write.format("delta").mode("append")
    writer.partitionBy(*target.partition_by).save(target.path(settings))


def run_quality(run_job_here: RunJob, settings: Settings, docs: Path, *args: str) -> Ran:
    return run_job_here(
        "jobs.quality",
        "--docs-dir",
        str(docs),
        *args,
        TRIBUTARY_PROFILE="local",
        TRIBUTARY__STORAGE__ROOT=settings.storage.root,
        TRIBUTARY__STORAGE__CHECKPOINTS=settings.storage.checkpoints,
    )


def read(spark: SparkSession, settings: Settings, name: str, run_id: str) -> DataFrame:
    df = read_table(spark, table(name), settings)
    return df.where(df["run_id"] == run_id)


def docs_index(stdout: str) -> Path:
    [line] = [line for line in stdout.splitlines() if line.startswith("Data Docs: ")]
    return Path(line.removeprefix("Data Docs: "))


def output(done: Ran) -> str:
    return (
        f"status {done.returncode}\n--- stdout:\n{done.stdout}\n--- stderr:\n{done.stderr[-3000:]}"
    )


@pytest.fixture(scope="module")
def warned_lakehouse(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Settings, Path]:
    """silver.events with a negative purchase amount and a null user_id; a clean bronze."""
    tmp = tmp_path_factory.mktemp("quality_job")
    settings = lakehouse(tmp)
    write(
        spark,
        settings,
        "silver.events",
        SILVER,
        silver(0),
        silver(1),
        silver(3, amount=Decimal("-5.00")),
        silver(4, user_id=None),
    )
    write(spark, settings, "bronze.events_raw", RAW, raw(0), raw(1), raw(2))
    return settings, tmp / "docs"


def test_quarantined_rows_and_runs_are_recorded_once(
    spark: SparkSession, warned_lakehouse: tuple[Settings, Path], run_job_here: RunJob
) -> None:
    settings, docs = warned_lakehouse
    tables = ["--table", "silver.events", "bronze.events_raw", "bronze.quarantine"]
    done = run_quality(run_job_here, settings, docs, *tables, "--run-id", "it-1")
    assert done.returncode == Exit.OK, output(done)
    lines = done.stdout.splitlines()
    assert any(line.startswith("silver.events (version 0): warned") for line in lines), output(done)
    assert any(line.startswith("bronze.events_raw (version 0): passed") for line in lines)
    assert "bronze.quarantine: skipped, the table does not exist yet" in lines
    assert docs_index(done.stdout) == (docs / "index.html").resolve()
    assert docs_index(done.stdout).is_file()

    routed = read(spark, settings, "dq.quality_quarantine", "it-1").collect()
    assert sorted((json.loads(r["row"])["event_id"], r["reasons"]) for r in routed) == [
        ("e-3", ["dq:amount_not_negative"]),
        ("e-4", ["dq:user_id_not_null"]),
    ]
    assert {(r["table_name"], r["table_version"]) for r in routed} == {("silver.events", 0)}
    runs = {r["table_name"]: r for r in read(spark, settings, "dq.quality_runs", "it-1").collect()}
    assert set(runs) == {"silver.events", "bronze.events_raw"}
    assert runs["silver.events"]["verdict"] == "warned"
    assert runs["silver.events"]["failures"] == {"amount_not_negative": 1, "user_id_not_null": 1}
    assert runs["silver.events"]["quarantined"] == 2
    assert Path(runs["silver.events"]["data_docs"]).is_file()
    assert (runs["bronze.events_raw"]["verdict"], runs["bronze.events_raw"]["failures"]) == (
        "passed",
        {},
    )


def test_a_rerun_of_a_run_id_writes_nothing_twice(spark: SparkSession, tmp_path: Path) -> None:
    """What an Airflow retry after a crash does: record the same run id again (in-process,
    with a made-up result: the writes are what is under test)."""
    settings = lakehouse(tmp_path)
    request = QualityRequest(("bronze.events_raw",), ARRIVED, ARRIVED + HOUR, "it-rerun", None)
    result = SuiteResult(Suite("bronze.events_raw", ()), ())
    routed = rows_frame(
        spark,
        [("it-rerun", "bronze.events_raw", 0, "{}", ["dq:x"], "dq:x")],
        "run_id string, table_name string, table_version long, row string, "
        "reasons array<string>, reason string",
    )
    for _ in range(2):
        validated = Validated("bronze.events_raw", 0, result, routed, 0.1)
        record(spark, settings, QualityOutcome(request, [validated]), datetime.now(UTC))
        assert validated.quarantined == 1
    assert read(spark, settings, "dq.quality_quarantine", "it-rerun").count() == 1
    [run] = read(spark, settings, "dq.quality_runs", "it-rerun").collect()
    assert (run["verdict"], run["quarantined"]) == ("passed", 1)


def test_a_duplicate_event_id_fails_the_run_naming_the_check(
    spark: SparkSession, tmp_path: Path, run_job_here: RunJob
) -> None:
    settings = lakehouse(tmp_path)
    write(spark, settings, "silver.events", SILVER, silver(0), silver(1), silver(2, event_id="e-0"))
    done = run_quality(
        run_job_here, settings, tmp_path / "docs", "--layer", "silver", "--run-id", "it-dup"
    )
    assert done.returncode == Exit.CHECKS_FAILED, output(done)
    broken = [line for line in done.stdout.splitlines() if line.startswith("FAIL check broken")]
    assert len(broken) == 1, output(done)
    assert "silver.events: event_id_unique" in broken[0]
    assert "(2 rows)" in broken[0] and "'e-0'" in broken[0], broken[0]
    assert docs_index(done.stdout).is_file()
    [run] = read(spark, settings, "dq.quality_runs", "it-dup").collect()
    assert (run["verdict"], run["failures"]) == ("failed", {"event_id_unique": 2})
    assert read(spark, settings, "dq.quality_quarantine", "it-dup").count() == 0
