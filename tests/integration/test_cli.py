"""`tributary` (jobs/cli.py) refuses what it cannot answer in one line, changing nothing: bad
arguments, storage that is down, statements that fail or would write. Its answers to real
queries are checked in tests/integration/test_batch_layer.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from lakehouse.core.config import load_settings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

REPO = Path(__file__).parents[2]


def local_lake(cwd: Path) -> dict[str, str]:
    return {
        "TRIBUTARY_PROFILE": "local",
        "TRIBUTARY__STORAGE__ROOT": str(cwd / "lakehouse"),
        "TRIBUTARY__STORAGE__CHECKPOINTS": str(cwd / "checkpoints"),
    }


def tributary(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """The command in a process of its own, on an empty local lakehouse in `cwd` unless `env`
    says otherwise. The timeout is well below the minutes S3A would retry a dead MinIO."""
    lake = local_lake(cwd)
    return subprocess.run(
        [sys.executable, "-m", "jobs.cli", *args],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(REPO), **lake, **env},
        capture_output=True,
        text=True,
        timeout=90,
    )


def said(run: subprocess.CompletedProcess[str], prefix: str = "tributary") -> str:
    """The one error line, after checking it is the only one and no traceback came with it."""
    assert "Traceback" not in run.stderr, run.stderr
    assert '"level": "ERROR"' not in run.stderr, "PySpark's JSON error log is not shown"
    lines = [line for line in run.stderr.splitlines() if line.startswith(prefix)]
    assert len(lines) == 1, run.stderr
    return lines[0]


@pytest.mark.parametrize(
    "args", [("query", "event_counts_1m"), ("sql", "SELECT 1"), ("compare",)], ids=str
)
def test_with_minio_down_each_command_says_so_at_once(tmp_path: Path, args: tuple[str]) -> None:
    run = tributary(
        *args,
        cwd=tmp_path,
        TRIBUTARY_PROFILE="minio",
        TRIBUTARY__STORAGE__ROOT="s3a://tributary/lakehouse",
        TRIBUTARY__STORAGE__CHECKPOINTS="s3a://tributary/checkpoints",
        TRIBUTARY__S3__ENDPOINT="http://127.0.0.1:1",  # nothing listens there
    )
    assert run.returncode == 1
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
    tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    run = tributary(*args, cwd=tmp_path)
    assert run.returncode == 2
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
    tmp_path: Path, statement: str, message: str
) -> None:
    run = tributary("sql", statement, cwd=tmp_path)
    assert run.returncode == 2
    assert message in said(run)
    assert sorted(p.name for p in tmp_path.iterdir()) == [], "nothing in the working folder"


def test_compare_names_a_missing_replay_version_and_says_when_nothing_compares(
    tmp_path: Path,
) -> None:
    missing = tributary("compare", "--left", "replay:v9", cwd=tmp_path)
    assert missing.returncode == 2
    assert "no version v9; versions: none yet" in said(missing)

    empty = tributary("compare", cwd=tmp_path)
    assert empty.returncode == 3, empty.stderr
    assert "nothing to compare: no window is final on both sides" in empty.stdout
    assert "gate passed" not in empty.stdout


def test_compare_with_a_removed_version_has_nothing_to_compare(
    tmp_path: Path, spark: SparkSession
) -> None:
    """Not a bad request: the reconcile DAG compares every version a replay announced, and one
    may have been removed before its comparison runs."""
    from lakehouse.replay.promotion import remove
    from lakehouse.replay.versions import record_version_event

    settings = load_settings(environ={**os.environ, **local_lake(tmp_path)})
    record_version_event(spark, settings, "v1", "caught_up")
    remove(spark, settings, "v1")

    run = tributary("compare", "--left", "replay:v1", cwd=tmp_path)
    assert run.returncode == 3, run.stderr
    assert "version v1 was removed: its tables are gone: nothing to compare" in said(run)
