"""The `tributary` command that `make setup` installs in the venv: it finds its clone from
anywhere, and says what to do when it cannot. Its answers to a real query are checked with
the batch layer's data in tests/integration/test_batch_layer.py."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

REPO = Path(__file__).parents[2]
COMMAND = REPO / ".venv" / "bin" / "tributary"  # through the clone's .venv symlink
SOURCE = REPO / "infra" / "python" / "tributary_command.py"


def tributary(
    *args: str, cwd: Path, command: Path = COMMAND, home: Path | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("TRIBUTARY_HOME", "PYTHONPATH")}
    if home is not None:
        env["TRIBUTARY_HOME"] = str(home)
    return subprocess.run(
        [str(command), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60
    )


def test_setup_installs_the_current_command_run_by_the_venvs_python() -> None:
    assert os.access(COMMAND, os.X_OK), f"{COMMAND} is missing: run `make setup`"
    shebang, body = COMMAND.read_text().split("\n", 1)
    assert shebang == f"#!{COMMAND.resolve().parent / 'python'}"
    assert body == SOURCE.read_text().split("\n", 1)[1], "an old copy: run `make setup`"


def test_called_through_the_clones_venv_it_works_from_any_folder(tmp_path: Path) -> None:
    run = tributary("--help", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "query" in run.stdout and "compare" in run.stdout


def test_inside_a_clone_it_finds_the_clone_from_a_subfolder() -> None:
    # The venv's own path (not the .venv symlink) says nothing about the clone.
    run = tributary("--help", cwd=REPO / "lakehouse", command=COMMAND.resolve())
    assert run.returncode == 0, run.stderr


def test_outside_a_clone_it_says_what_to_do(tmp_path: Path) -> None:
    run = tributary("--help", cwd=tmp_path, command=COMMAND.resolve())
    assert run.returncode == 1
    assert "not inside a Tributary clone" in run.stderr and "TRIBUTARY_HOME" in run.stderr
    assert "Traceback" not in run.stderr

    wrong_home = tributary("--help", cwd=tmp_path, command=COMMAND.resolve(), home=tmp_path)
    assert wrong_home.returncode == 1
    assert f"TRIBUTARY_HOME={tmp_path} is not a Tributary clone" in wrong_home.stderr


def test_bad_arguments_get_one_clear_line(tmp_path: Path) -> None:
    reversed_range = tributary(
        "query",
        "event_counts_1m",
        "--from",
        "2026-01-02T00:00Z",
        "--to",
        "2026-01-01T00:00Z",
        cwd=tmp_path,
        command=COMMAND.resolve(),
        home=REPO,
    )
    assert reversed_range.returncode == 2
    assert "is not before" in reversed_range.stderr
    unknown_view = tributary("query", "no_such_view", cwd=tmp_path)
    assert unknown_view.returncode == 2
    assert "invalid choice: 'no_such_view'" in unknown_view.stderr
    for run in (reversed_range, unknown_view):
        assert "Traceback" not in run.stderr
