"""The bronze migration's command line: `python -m jobs.migrate_bronze` and `tributary
migrate-bronze` refuse, in one line and with the contract's status, what they cannot do."""

from __future__ import annotations

from pathlib import Path

from jobs.contract import Exit
from tests.jobs_in_process import RunJob


def lakehouse(tmp_path: Path) -> dict[str, str]:
    return {
        "TRIBUTARY_PROFILE": "local",
        "TRIBUTARY__STORAGE__ROOT": str(tmp_path / "lakehouse"),
        "TRIBUTARY__STORAGE__CHECKPOINTS": str(tmp_path / "checkpoints"),
    }


def test_a_missing_bronze_table_is_refused_and_nothing_is_created(
    spark, tmp_path: Path, run_job_here: RunJob
) -> None:
    for module, argv in (("jobs.migrate_bronze", ()), ("jobs.cli", ("migrate-bronze",))):
        ran = run_job_here(module, *argv, **lakehouse(tmp_path))
        assert ran.returncode == Exit.BAD_REQUEST, ran
        assert "bronze.events_raw: no table at" in ran.stderr and "nothing changed" in ran.stderr
        assert "Traceback" not in ran.stderr
    assert not (tmp_path / "lakehouse").exists()


def test_a_table_without_bytes_to_migrate_is_refused(tmp_path: Path, run_job_here: RunJob) -> None:
    ran = run_job_here("jobs.migrate_bronze", "--table", "silver.events", **lakehouse(tmp_path))
    assert ran.returncode == Exit.BAD_REQUEST
    assert ran.stderr.startswith("migrate_bronze: silver.events is not a table with bytes")
