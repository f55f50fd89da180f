"""`tributary compare --cdc`: the CDC reconciliation's summary in the terminal, on a lakehouse
built in code: a table the stream got wrong is named, with status 4, and nothing is recorded
without --record; with it, the run's rows are in dq.reconciliation_runs. Options of a comparison
of views beside --cdc, and --table without it, are refused in one line."""

from __future__ import annotations

import pytest

from jobs.contract import Exit
from lakehouse.core.delta_io import read_table, table_exists
from lakehouse.core.paths import STATE_ENV
from lakehouse.reconcile.changelog import RUNS
from tests.captured_lakehouse import build_users, spoil_segment


def lakehouse_env(tmp_path) -> dict[str, str]:
    return {
        "TRIBUTARY__STORAGE__ROOT": str(tmp_path / "lakehouse"),
        "TRIBUTARY__STORAGE__CHECKPOINTS": str(tmp_path / "checkpoints"),
        "TRIBUTARY_PROFILE": "local",
        STATE_ENV: str(tmp_path / "state"),
    }


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--cdc", "--view", "event_counts_1m", "--from", "2026-11-25T10:00Z"],
            "tributary compare: --view, --from with --cdc: it compares every captured table "
            "(or --table) as of the changelog stream's last batch; nothing written",
        ),
        (
            ["--cdc", "--run-id", "x"],
            "tributary compare: --run-id names a recorded run: give --record too; nothing written",
        ),
        (["--table", "users"], "tributary compare: --table goes with --cdc; nothing written"),
    ],
)
def test_options_that_do_not_go_together_are_refused_in_one_line(
    run_job_here, tmp_path, argv, message
) -> None:
    ran = run_job_here("jobs.cli", "compare", *argv, **lakehouse_env(tmp_path))
    assert ran.returncode == Exit.BAD_REQUEST
    assert ran.stderr.strip().splitlines() == [message]


@pytest.mark.slow  # builds the captured tables and runs two comparisons
def test_the_summary_names_the_table_the_stream_got_wrong_and_records_only_when_asked(
    spark, run_job_here, tmp_path
) -> None:
    settings = build_users(spark, tmp_path)
    spoil_segment(spark, settings, "u1", "lost")
    env = lakehouse_env(tmp_path)
    ran = run_job_here("jobs.cli", "compare", "--cdc", "--table", "users", **env)
    assert ran.returncode == Exit.CHECKS_FAILED, ran.stderr
    lines = ran.stdout.splitlines()
    assert lines[2].split() == ["users_current", "2", "1", "1", "0"]
    assert lines[-1].endswith("users_current: 1 of 2 keys differ")
    assert not table_exists(spark, RUNS, settings), "nothing recorded without --record"

    recorded = run_job_here(
        "jobs.cli", "compare", "--cdc", "--record", "--run-id", "by-hand", "--table", "users", **env
    )
    assert recorded.returncode == Exit.CHECKS_FAILED, recorded.stderr
    rows = read_table(spark, RUNS, settings).collect()
    assert sorted((r["run_id"], r["view"], r["verdict"]) for r in rows) == [
        ("cdc:by-hand", "users_current", "failed"),
        ("cdc:by-hand", "users_history", "passed"),
    ]
