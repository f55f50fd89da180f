"""Where running stream joins (jobs.stream_joins) look for a request to stop; importable
without pyspark (a DAG's supervisor creates the file)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from lakehouse.core.paths import state_dir


def stream_joins_stop_file(env: Mapping[str, str] | None = None) -> Path:
    """Created to ask the running stream joins to stop after their current batches."""
    return state_dir(env) / "run" / "stream_joins.stop"
