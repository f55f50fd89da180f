"""An Airflow run's parameters (its trigger form or conf), checked against those its DAG
declares. Airflow keeps a name it does not know as one more parameter, so a misspelt one
(`{"actoin": "stop"}`) would be ignored and the run would do its default instead."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from typing import Any


def unknown_params_message(given: Iterable[str], declared: Iterable[str]) -> str | None:
    """What is wrong with the names `given`, in one line, or None when the DAG declares them all."""
    known = sorted(declared)
    unknown = sorted(set(given) - set(known))
    if not unknown:
        return None
    named = []
    for name in unknown:
        close = difflib.get_close_matches(name, known, n=1)
        named.append(f"{name!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    return (
        f"unknown parameter{'s' if len(unknown) > 1 else ''} {', '.join(named)}: this DAG "
        f"takes {', '.join(known) or 'none'}; nothing was done"
    )


def checked_params(context: Mapping[str, Any]) -> Mapping[str, Any]:
    """The run's parameters, once every name in its conf is one the DAG declares; else the
    task fails at once, without retries (a task calls this before it changes anything)."""
    from .failure import Refused

    conf = getattr(context.get("dag_run"), "conf", None) or {}
    problem = unknown_params_message(conf, context["dag"].params)
    if problem:
        raise Refused(problem)
    params: Mapping[str, Any] = context["params"]
    return params
