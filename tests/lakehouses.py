"""Local lakehouses in a folder of the test's choosing: one built once per module (or
session) and copied by each test that writes to it, instead of built again per test."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from lakehouse.core.config import Settings, load_settings
from lakehouse.core.paths import STATE_ENV


def local_lakehouse(folder: Path) -> Settings:
    """The local profile with its lakehouse and checkpoints in `folder`, as the
    `local_settings` fixture makes it for one test's own folder."""
    env = {k: v for k, v in os.environ.items() if k != "TRIBUTARY_PROFILE"}
    env |= {
        "TRIBUTARY__STORAGE__ROOT": str(folder / "lakehouse"),
        "TRIBUTARY__STORAGE__CHECKPOINTS": str(folder / "checkpoints"),
    }
    return load_settings(profile="local", environ=env)


def job_env(settings: Settings, state: Path) -> dict[str, str]:
    """The environment a job run by `run_job_here` needs to see `settings`' local lakehouse,
    with its locks and logs in `state`."""
    return {
        "TRIBUTARY_PROFILE": "local",
        "TRIBUTARY__STORAGE__ROOT": settings.storage.root,
        "TRIBUTARY__STORAGE__CHECKPOINTS": settings.storage.checkpoints,
        STATE_ENV: str(state),
    }


def moved_to(settings: Settings, folder: Path) -> Settings:
    """`settings` (speed settings and all) with the lakehouse and checkpoints in `folder`."""
    storage = settings.storage.model_copy(
        update={"root": str(folder / "lakehouse"), "checkpoints": str(folder / "checkpoints")}
    )
    return settings.model_copy(update={"storage": storage})


def copied(source: Path, target: Path) -> Path:
    """A copy of a folder a lakehouse was built in (tables, logs and checkpoints), for a test
    that writes: Delta's log names files relative to the table, so the copy is a table too."""
    shutil.copytree(source, target)
    return target
