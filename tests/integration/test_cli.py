"""`tributary` (jobs/cli.py) refuses what it cannot answer in one line, changing nothing: bad
arguments, storage that is down, statements that fail or would write. Its answers to real
queries are checked in tests/integration/test_batch_layer.py.

The command runs in the test's process (tests/integration/tributary_here.py); one test runs
the installed `.venv/bin/tributary` from a folder of its own, as a user would."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from jobs.contract import Exit
from lakehouse.core.config import load_settings
from lakehouse.core.paths import REPO_ROOT
from tests.integration.tributary_here import PYSPARK_LOGGED, run_tributary
from tests.jobs_in_process import Ran, RunJob

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def local_lake(cwd: Path) -> dict[str, str]:
    return {
        "TRIBUTARY_PROFILE": "local",
        "TRIBUTARY__STORAGE__ROOT": str(cwd / "lakehouse"),
        "TRIBUTARY__STORAGE__CHECKPOINTS": str(cwd / "checkpoints"),
    }


@pytest.fixture
def tributary(run_job_here: RunJob, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> RunJob:
    """The command, from `tmp_path` as its working folder, on an empty local lakehouse in it
    unless `env` says otherwise."""
    monkeypatch.chdir(tmp_path)

    def run(*args: str, **env: str) -> Ran:
        return run_tributary(run_job_here, *args, **{**local_lake(tmp_path), **env})

    return run


def said(run: Ran, prefix: str = "tributary") -> str:
    """The one error line, after checking it is the only one and no traceback came with it."""
    assert "Traceback" not in run.stderr, run.stderr
    assert PYSPARK_LOGGED not in run.stderr, "PySpark's JSON error log is not shown"
    lines = [line for line in run.stderr.splitlines() if line.startswith(prefix)]
    assert len(lines) == 1, run.stderr
    return lines[0]


@pytest.mark.parametrize(
    "args", [("query", "event_counts_1m"), ("sql", "SELECT 1"), ("compare",)], ids=str
)
def test_with_minio_down_each_command_says_so_at_once(tributary: RunJob, args: tuple[str]) -> None:
    """At once: the command asks MinIO itself before Spark reads a path there, so it answers
    in one line instead of leaving Spark's S3A to retry for minutes."""
    run = tributary(
        *args,
        TRIBUTARY_PROFILE="minio",
        TRIBUTARY__STORAGE__ROOT="s3a://tributary/lakehouse",
        TRIBUTARY__STORAGE__CHECKPOINTS="s3a://tributary/checkpoints",
        TRIBUTARY__S3__ENDPOINT="http://127.0.0.1:1",  # nothing listens there
    )
    assert run.returncode == Exit.CANNOT_RUN
    assert "MinIO/S3 at http://127.0.0.1:1 is not reachable: start it with `make up`" in said(run)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("query", "event_counts_1m", "--limit", "-5"), "--limit: must be at least 1, got -5"),
        (("sql", "SELECT 1", "--limit", "0"), "--limit: must be at least 1, got 0"),
        (("sql", "SELECT 1", "--limit", "many"), "--limit: 'many' is not a whole number"),
        (("compare", "--run-id", "x"), "--run-id names a recorded run: give --record too"),
    ],
)
def test_bad_arguments_are_refused_before_anything_runs(
    tributary: RunJob, args: tuple[str, ...], message: str
) -> None:
    run = tributary(*args)
    assert run.returncode == Exit.BAD_REQUEST
    assert message in run.stderr and "Traceback" not in run.stderr


@pytest.mark.parametrize(
    ("statement", "message"),
    [
        ("SELECT 1/0", "[DIVIDE_BY_ZERO]"),
        ("SELECT CAST('abc' AS INT)", "[CAST_INVALID_INPUT]"),
        ("SELECT * FROM nope", "[TABLE_OR_VIEW_NOT_FOUND]"),
        # A condition left out: WHERE is a keyword, not the subquery's alias.
        ("SELECT * FROM (SELECT 1 AS a) WHERE", "[PARSE_SYNTAX_ERROR]"),
        ("CREATE TABLE t AS SELECT 1 AS a", "read-only command"),
        ("WITH a AS (SELECT 1 AS x) INSERT INTO t SELECT * FROM a", "read-only command"),
        # A typo is not a write: the refusal names the word and what was meant.
        ("SELEC 1", "SELEC does not start a query: did you mean SELECT? Nothing was run"),
    ],
)
def test_a_statement_that_fails_or_would_write_gets_one_line_and_leaves_no_files(
    tributary: RunJob, tmp_path: Path, statement: str, message: str
) -> None:
    run = tributary("sql", statement)
    assert run.returncode == Exit.BAD_REQUEST
    assert message in said(run)
    assert sorted(p.name for p in tmp_path.iterdir()) == [], "nothing in the working folder"


def test_the_installed_command_refuses_a_write_from_any_folder_and_leaves_no_files(
    tmp_path: Path,
) -> None:
    """The command `make setup` installs, in a process of its own started in an empty folder
    (so Spark's JVM works there too): a statement that would write is refused once Spark has
    parsed it, in one line, and nothing appears in the folder (Spark makes ./spark-warehouse
    and ./metastore_db wherever it starts unless told otherwise)."""
    run = subprocess.run(
        [
            str(REPO_ROOT / ".venv" / "bin" / "tributary"),
            "sql",
            "WITH a AS (SELECT 1 AS x) INSERT INTO t SELECT * FROM a",
        ],
        cwd=tmp_path,
        env={**os.environ, **local_lake(tmp_path / "elsewhere")},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == Exit.BAD_REQUEST, run.stderr
    assert '"level": "ERROR"' not in run.stderr, "PySpark's JSON error log is not shown"
    assert "read-only command" in said(Ran(run.returncode, run.stdout, run.stderr))
    assert sorted(p.name for p in tmp_path.iterdir()) == [], "nothing in the working folder"


def test_compare_names_a_missing_replay_version_and_says_when_nothing_compares(
    tributary: RunJob,
) -> None:
    missing = tributary("compare", "--left", "replay:v9")
    assert missing.returncode == Exit.BAD_REQUEST
    assert "no version v9; versions: none yet" in said(missing)

    empty = tributary("compare")
    assert empty.returncode == Exit.NOTHING_TO_DO, empty.stderr
    assert "nothing to compare: no window is final on both sides" in empty.stdout
    assert "gate passed" not in empty.stdout


def test_compare_with_a_removed_version_has_nothing_to_compare(
    tributary: RunJob, tmp_path: Path, spark: SparkSession
) -> None:
    """Not a bad request: the reconcile DAG compares every version a replay announced, and one
    may have been removed before its comparison runs."""
    from lakehouse.replay.promotion import remove
    from lakehouse.replay.versions import record_version_event

    settings = load_settings(environ={**os.environ, **local_lake(tmp_path)})
    record_version_event(spark, settings, "v1", "caught_up")
    remove(spark, settings, "v1")

    run = tributary("compare", "--left", "replay:v1")
    assert run.returncode == Exit.NOTHING_TO_DO, run.stderr
    assert "version v1 was removed: its tables are gone: nothing to compare" in said(run)
