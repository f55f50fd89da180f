"""The run's summary as terminal text: what `tributary compare` and the job print."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from lakehouse.reconcile.gate import GateVerdict, describe_window

if TYPE_CHECKING:
    from lakehouse.reconcile.run import Reconciliation

COLUMNS = ("compared", "equal", "explained", "unexplained", "beyond", "open")
FIRST_SHOWN = 10


def scope_text(run: Reconciliation) -> str:
    start, end = run.scope
    if start is None and end is None:
        return "every final window"
    if len(run.ranges) > 1:
        return ", ".join(f"[{_when(a)}, {_when(b)})" for a, b in run.ranges)
    return f"[{_when(start) if start else '...'}, {_when(end) if end else '...'})"


def summary_text(run: Reconciliation, verdict: GateVerdict, shown: int = FIRST_SHOWN) -> str:
    width = max(len(v.view) for v in run.views) if run.views else 4
    lines = [
        f"reconciliation {run.run_id}: {run.left} vs {run.right}, {scope_text(run)}",
        f"  {'view':<{width}}  " + "  ".join(f"{c:>11}" for c in COLUMNS),
    ]
    for v in run.views:
        values = (
            v.compared,
            v.counts["equal"],
            v.counts["explained"],
            v.counts["unexplained"],
            v.beyond_threshold,
            v.counts["open"],
        )
        note = f"  ({v.note})" if v.note else ""
        lines.append(f"  {v.view:<{width}}  " + "  ".join(f"{x:>11}" for x in values) + note)
    lines.append(
        "  open = not final on both sides yet (left out); beyond = unexplained beyond threshold"
    )
    differing = [
        f"  {v.view} {describe_window(v.keys, r)}: {r['explanation']}"
        for v in run.views
        for r in v.unexplained
    ]
    if differing:
        lines.append(f"first unexplained windows ({min(shown, len(differing))} shown):")
        lines += differing[:shown]
    lines.append(verdict.message().splitlines()[0])
    return "\n".join(lines)


def _when(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")
