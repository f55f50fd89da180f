"""Trigger-form fields the DAGs share: labels in words, no "null" choice, no regular
expression for a person to decode (the jobs check names and say what is wrong in words), and
the replay versions that exist offered as choices."""

from __future__ import annotations

import logging
from typing import Any

from airflow.sdk import Param

log = logging.getLogger("tributary.dags.forms")

VERSION_RULE = "lowercase letters, digits and _, starting with a letter (e.g. v3)"


def mode_param(kappa_effect: str) -> Param:
    """The lambda/kappa mode for one run; empty means the configured one."""
    return Param(
        None,
        type=["null", "string"],
        enum=[None, "lambda", "kappa"],
        values_display={
            None: "as configured (config/ mode)",
            "lambda": "lambda: batch and speed layers",
            "kappa": "kappa: replays only",
        },
        title="Mode",
        description=f"For this run only. In kappa mode {kappa_effect}",
    )


def version_param(default: str | None, title: str, description: str) -> Param:
    """A replay version's name: the existing versions offered, any name accepted."""
    offered = existing_versions()
    choices: dict[str, Any] = {"examples": offered} if offered else {}
    existing = f"existing: {', '.join(offered[:8])}" if offered else "no version exists yet"
    return Param(
        default,
        type=["null", "string"],
        title=title,
        description=f"{description} ({existing}). A name is {VERSION_RULE}",
        **choices,
    )


def existing_versions() -> list[str]:
    """The replay versions the lakehouse holds, newest first, as Airflow parses the DAG file
    (again every few seconds, so a new version shows up in the form); [] when the lakehouse
    cannot be read, since the form must render all the same."""
    try:
        from lakehouse.core.config import get_settings
        from lakehouse.replay.names import version_names

        return version_names(get_settings())
    except Exception as err:
        log.debug("no versions to offer: %s", err)
        return []
