"""The setup's check of a cached venv: a venv whose packages lost files is rebuilt, not used."""

from __future__ import annotations

from pathlib import Path

import pytest

from infra.bootstrap import missing_venv_files, venv_dir


def fake_venv(root: Path, files: dict[str, str]) -> Path:
    site = root / "lib" / "python3.11" / "site-packages"
    record = site / "pkg-1.0.dist-info" / "RECORD"
    record.parent.mkdir(parents=True)
    listed = [*files, "pkg/__pycache__/mod.cpython-311.pyc", "pkg-1.0.dist-info/RECORD"]
    record.write_text("".join(f"{name},sha256=x,1\n" for name in listed))
    for name, text in files.items():
        (site / name).parent.mkdir(parents=True, exist_ok=True)
        (site / name).write_text(text)
    return site


def test_a_venv_with_every_listed_file_is_intact(tmp_path: Path) -> None:
    fake_venv(tmp_path, {"pkg/__init__.py": "", "pkg/mod.py": ""})
    assert missing_venv_files(tmp_path) == []


def test_a_listed_file_gone_is_reported_and_bytecode_is_not_required(tmp_path: Path) -> None:
    site = fake_venv(tmp_path, {"pkg/__init__.py": "", "pkg/_config.py": ""})
    (site / "pkg" / "_config.py").unlink()
    assert missing_venv_files(tmp_path) == ["pkg/_config.py"]


def test_the_venv_these_tests_run_in_is_intact() -> None:
    assert missing_venv_files(venv_dir()) == []


@pytest.mark.parametrize("package", ["great_expectations", "airflow", "pyspark", "pandas"])
def test_the_venv_s_packages_are_compiled_once_not_by_every_process(package: str) -> None:
    """Every job, task and test worker imports these: compiled at setup, not on each import
    (where PYTHONDONTWRITEBYTECODE is set, nothing would ever cache them)."""
    [site] = venv_dir().glob("lib/python3.11/site-packages")
    assert list((site / package / "__pycache__").glob("__init__.cpython-311*.pyc")), package
