"""Reconciliation: batch vs speed (lambda), replay vs live and replay vs batch (kappa), per
window, with every difference explained or flagged; results in dq.* and an HTML report.

    compare_view(left, right, view, thresholds, ...)  the pure per-view comparison
    reconcile(spark, settings, left, right, views, run_id, started_at, start, end)
    gate(reconciliation) / recorded_gate(spark, settings, run_id)   passed or failed, why
    publish(spark, settings, reconciliation, verdict)  the HTML report and the dq records
"""

from lakehouse.reconcile.compare import (
    EQUAL,
    EXPLAINED,
    OPEN,
    UNEXPLAINED,
    Missing,
    compare_view,
)
from lakehouse.reconcile.gate import GateVerdict, gate, gate_views, recorded_gate
from lakehouse.reconcile.publish import publish, report_path
from lakehouse.reconcile.run import Reconciliation, ViewComparison, reconcile
from lakehouse.reconcile.sources import (
    Source,
    UnknownSourceError,
    batch_source,
    named_source,
    speed_source,
    stream_source,
)
from lakehouse.reconcile.summary import summary_text

__all__ = [
    "EQUAL",
    "EXPLAINED",
    "OPEN",
    "UNEXPLAINED",
    "GateVerdict",
    "Missing",
    "Reconciliation",
    "Source",
    "UnknownSourceError",
    "ViewComparison",
    "batch_source",
    "compare_view",
    "gate",
    "gate_views",
    "named_source",
    "publish",
    "reconcile",
    "recorded_gate",
    "report_path",
    "speed_source",
    "stream_source",
    "summary_text",
]
