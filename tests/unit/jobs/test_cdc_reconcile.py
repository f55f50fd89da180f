"""`python -m jobs.cdc_reconcile`: its refusals and its answer before the stream has run; what
it finds in the tables is tested on the library (tests/unit/cdc/test_changelog.py)."""

from __future__ import annotations

from jobs.contract import Exit


def test_before_the_changelog_stream_has_run_nothing_is_compared(
    spark, run_job_here, tmp_path
) -> None:
    ran = run_job_here(
        "jobs.cdc_reconcile",
        TRIBUTARY__STORAGE__ROOT=str(tmp_path / "lakehouse"),
        TRIBUTARY__STORAGE__CHECKPOINTS=str(tmp_path / "checkpoints"),
        TRIBUTARY_PROFILE="local",
    )
    assert ran.returncode == Exit.NOTHING_TO_DO
    assert "the changelog stream has completed no batch yet: nothing compared" in ran.stderr


def test_an_unknown_argument_is_refused_in_one_line(run_job_here) -> None:
    ran = run_job_here("jobs.cdc_reconcile", "--table", "users")
    assert ran.returncode == Exit.BAD_REQUEST
    assert ran.stderr.strip().splitlines() == [
        "python -m jobs.cdc_reconcile: error: unrecognized argument --table (see --help)"
    ]
