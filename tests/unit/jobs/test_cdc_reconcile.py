"""`python -m jobs.cdc_reconcile`: its refusals (one line, nothing written), its answer before
the stream has run, and its exit status and record on a lakehouse built in code: a table the
stream got wrong ends it with status 4 naming the table and kind, recorded as failed; equal
tables end it with 0, recorded as passed. What it finds is tested on the library
(tests/unit/cdc/test_reconcile.py)."""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F

from jobs.contract import Exit, read_result
from lakehouse.core.delta_io import read_table
from lakehouse.core.paths import STATE_ENV
from lakehouse.reconcile.changelog import RUNS
from tests.captured_lakehouse import build_users, spoil_segment

pytestmark = pytest.mark.slow  # make test-fast leaves it out (docs/testing.md)


def lakehouse_env(tmp_path) -> dict[str, str]:
    return {
        "TRIBUTARY__STORAGE__ROOT": str(tmp_path / "lakehouse"),
        "TRIBUTARY__STORAGE__CHECKPOINTS": str(tmp_path / "checkpoints"),
        "TRIBUTARY_PROFILE": "local",
        STATE_ENV: str(tmp_path / "state"),
    }


def test_before_the_changelog_stream_has_run_nothing_is_compared_without_spark(
    run_job_here, tmp_path, spark_refused
) -> None:
    ran = run_job_here("jobs.cdc_reconcile", **lakehouse_env(tmp_path))
    assert ran.returncode == Exit.NOTHING_TO_DO
    assert "the changelog stream has completed no batch yet: nothing compared" in ran.stderr
    asked = run_job_here("jobs.cli", "compare", "--cdc", **lakehouse_env(tmp_path))
    assert asked.returncode == Exit.NOTHING_TO_DO
    assert "the changelog stream has completed no batch yet: nothing to compare" in asked.stderr


def test_an_unknown_argument_is_refused_in_one_line(run_job_here) -> None:
    ran = run_job_here("jobs.cdc_reconcile", "--tabel", "users")
    assert ran.returncode == Exit.BAD_REQUEST
    assert ran.stderr.strip().splitlines() == [
        "python -m jobs.cdc_reconcile: error: unrecognized argument --tabel: did you mean "
        "--table? (see --help)"
    ]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--table", "carts"],
            "cdc_reconcile: --table carts: not captured (cdc.tables: users, products, orders); "
            "nothing written",
        ),
        (
            ["--run-id", " "],
            "cdc_reconcile: --run-id is empty: give the run's identity, or leave it out; "
            "nothing written",
        ),
    ],
)
def test_a_refused_argument_is_one_line_and_writes_nothing(
    run_job_here, tmp_path, argv, message
) -> None:
    ran = run_job_here("jobs.cdc_reconcile", *argv, **lakehouse_env(tmp_path))
    assert ran.returncode == Exit.BAD_REQUEST
    assert ran.stderr.strip().splitlines() == [message]
    assert not (tmp_path / "lakehouse").exists()


def test_a_table_the_stream_got_wrong_fails_the_job_and_is_recorded(
    spark, run_job_here, tmp_path
) -> None:
    settings = build_users(spark, tmp_path)
    spoil_segment(spark, settings, "u1", "lost")
    ran = run_job_here(
        "jobs.cdc_reconcile", "--run-id", "manual__x", "--table", "users", **lakehouse_env(tmp_path)
    )
    assert ran.returncode == Exit.CHECKS_FAILED, ran.stderr
    said = ran.stderr.strip().splitlines()
    assert said[0].startswith("CDC reconciliation failed") and said[1:] == [
        "users_current: 1 of 2 keys differ (first: user_id=u1: segment vip in the recompute, "
        "lost in the stream)"
    ]
    result = read_result("cdc_reconcile", ran.stdout.splitlines())
    assert result is not None and not result["passed"]
    assert result["tables"]["users"]["current"] == {"compared": 2, "equal": 1, "differing": 1}
    rows = read_table(spark, RUNS, settings).where(F.col("run_id") == "cdc:manual__x")
    assert sorted((r["view"], r["verdict"]) for r in rows.collect()) == [
        ("users_current", "failed"),
        ("users_history", "passed"),
    ]


def test_equal_tables_end_the_job_with_status_0_recorded_as_passed(
    spark, run_job_here, tmp_path
) -> None:
    settings = build_users(spark, tmp_path)
    ran = run_job_here("jobs.cdc_reconcile", "--run-id", "manual__y", **lakehouse_env(tmp_path))
    assert ran.returncode == Exit.OK, ran.stderr
    assert "CDC reconciliation passed" in ran.stdout
    verdicts = {r["verdict"] for r in read_table(spark, RUNS, settings).collect()}
    assert verdicts == {"passed"}
