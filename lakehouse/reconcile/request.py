"""A reconciliation asked for by name: which sources, views and range; compare, gate, record.

What `python -m jobs.reconcile`, `tributary compare` and the reconcile DAG ask for. A
`replay:<version>` side must name a version that holds tables; a version that was removed
is nothing to compare (the DAG compares every version a replay announced, and one may be
removed before its comparison runs).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lakehouse.core.config import Settings
from lakehouse.core.locks import exclusive_writer
from lakehouse.core.tables import RECONCILE
from lakehouse.reconcile.gate import GateVerdict, gate
from lakehouse.reconcile.publish import publish, report_path
from lakehouse.reconcile.report import write_report
from lakehouse.reconcile.run import Reconciliation, reconcile
from lakehouse.reconcile.sources import REPLAY_PREFIX, batch_run_intervals, named_source
from lakehouse.reconcile.summary import summary_text
from lakehouse.transforms.views import VIEWS

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

Say = Callable[[str], None]
# Another reconciliation (the DAG's, a manual one) finishes in minutes: wait for it.
LOCK_WAIT_SECONDS = 900


class BadComparison(ValueError):
    """The comparison cannot be run as asked; nothing is written."""


class VersionRemoved(Exception):
    """A replay:<version> side names a version that was removed: nothing to compare."""


@dataclass(frozen=True)
class ComparisonRequest:
    left: str
    right: str
    views: list[str]
    start: datetime | None = None
    end: datetime | None = None
    batch_runs: tuple[str, ...] = ()

    @classmethod
    def checked(
        cls,
        left: str,
        right: str,
        views: list[str] | None = None,
        start: datetime | None = None,
        end: datetime | None = None,
        batch_runs: list[str] | tuple[str, ...] = (),
    ) -> ComparisonRequest:
        if left == right:
            raise BadComparison(f"--left and --right are both {left!r}: compare two sources")
        if start and end and start >= end:
            raise BadComparison(f"--from {start} is not before --to {end}")
        if batch_runs and (start or end):
            raise BadComparison("give --batch-run or --from/--to, not both")
        chosen = list(dict.fromkeys(views or VIEWS))
        return cls(left, right, chosen, start, end, tuple(batch_runs))


@dataclass(frozen=True)
class Compared:
    """A recorded comparison: its summary, its gate and where its report is."""

    run: Reconciliation
    verdict: GateVerdict
    summary: str
    report: Path | None  # None: nothing was compared, nothing written

    @property
    def compared(self) -> bool:
        return bool(self.run.compared)

    def result(self) -> dict[str, Any]:
        """What a caller reports (the job's result line)."""
        run, verdict = self.run, self.verdict
        return {
            "run_id": run.run_id,
            "left": run.left,
            "right": run.right,
            "passed": verdict.passed,
            "beyond_threshold": verdict.beyond_threshold,
            "gate": verdict.message(),
            "report": None if self.report is None else str(self.report),
            "views": {
                v.view: {**v.counts, "compared": v.compared, "note": v.note} for v in run.views
            },
        }


def compare_sources(
    spark: SparkSession, settings: Settings, request: ComparisonRequest, run_id: str
) -> Reconciliation:
    """Compare the two sides (nothing recorded); the caller releases the run."""
    check_replay_sides(spark, settings, request)
    intervals = None
    if request.batch_runs:
        intervals, unknown = batch_run_intervals(spark, settings, list(request.batch_runs))
        if unknown:
            raise BadComparison(f"no batch run recorded in ops.batch_runs as {', '.join(unknown)}")
    return reconcile(
        spark,
        settings,
        named_source(request.left),
        named_source(request.right),
        request.views,
        run_id,
        datetime.now(UTC),
        request.start,
        request.end,
        ranges=intervals,
    )


def check_replay_sides(spark: SparkSession, settings: Settings, request: ComparisonRequest) -> None:
    """A replay:<version> side must name a version that holds tables: the comparison would
    otherwise find no table and compare nothing, which is not a passed gate."""
    from lakehouse.replay.versions import list_versions

    sides = (request.left, request.right)
    wanted = [s[len(REPLAY_PREFIX) :] for s in sides if s.startswith(REPLAY_PREFIX)]
    if not wanted:
        return
    found = {v.version: v for v in list_versions(settings)}
    for version in wanted:
        if version not in found:
            raise BadComparison(f"no version {version}; versions: {', '.join(found) or 'none yet'}")
        if found[version].status == "removed":
            raise VersionRemoved(f"version {version} was removed: its tables are gone")


def summary(run: Reconciliation, verdict: GateVerdict) -> str:
    """The run's summary; when nothing was compared it says so instead of naming the gate,
    which has nothing to pass on."""
    lines = summary_text(run, verdict).splitlines()
    if not run.compared:
        lines[-1] = "nothing to compare: no window is final on both sides"
    return "\n".join(lines)


def compare_and_gate(
    spark: SparkSession, settings: Settings, request: ComparisonRequest, run_id: str
) -> Compared:
    """Compare and judge the sides, and write the HTML report when something was compared;
    the dq tables are left as they are (`tributary compare` without --record)."""
    run = compare_sources(spark, settings, request, run_id)
    try:
        verdict = gate(run)
        path = write_report(run, verdict, report_path(run_id)) if run.compared else None
        return Compared(run, verdict, summary(run, verdict), path)
    finally:
        run.release()


def compare_and_record(
    spark: SparkSession,
    settings: Settings,
    request: ComparisonRequest,
    run_id: str,
    say: Say = print,
) -> Compared:
    """Compare, judge and, when something was compared, write the dq records and the report.
    The caller holds the reconcile writer's lock (one writer of dq.reconciliation_*)."""
    say(f"==> reconcile {request.left} vs {request.right} (run {run_id})")
    run = compare_sources(spark, settings, request, run_id)
    try:
        verdict = gate(run)
        path = publish(spark, settings, run, verdict) if run.compared else None
    finally:
        run.release()
    return Compared(run, verdict, summary(run, verdict), path)


def reconcile_and_record(
    settings: Settings, request: ComparisonRequest, run_id: str, say: Say = print
) -> Compared:
    """compare_and_record as the one reconcile writer, with its own Spark session."""
    from lakehouse.core.spark import get_spark
    from lakehouse.core.storage import ensure_bucket

    if settings.storage.on_s3:
        ensure_bucket(settings)
    with exclusive_writer(settings, RECONCILE, wait_seconds=LOCK_WAIT_SECONDS):
        spark = get_spark(RECONCILE, settings)
        return compare_and_record(spark, settings, request, run_id, say)
