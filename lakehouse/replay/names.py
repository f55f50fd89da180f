"""The replay versions that exist, by name, read with delta-rs and without pyspark: what a DAG
file offers in its trigger form when Airflow parses it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lakehouse.core.small_tables import table_rows
from lakehouse.core.tables import table

if TYPE_CHECKING:
    from datetime import datetime

    from lakehouse.core.config import Settings


def version_names(settings: Settings) -> list[str]:
    """Every version a replay recorded and no removal took back, newest first."""
    pointer = table_rows(settings, table("ops.serving_pointer"))
    removed = {r["version"] for r in pointer if r["action"] == "remove"}
    newest: dict[str, datetime] = {}
    for event in table_rows(settings, table("ops.replay_versions")):
        name, at = event["version"], event["at"]
        if name not in removed and (name not in newest or at > newest[name]):
            newest[name] = at
    return sorted(newest, key=newest.__getitem__, reverse=True)
