"""The joins' judges among the other reconciliations: run them, record them, tell them.

Each join has a judge that recomputes its output with the stream's own transforms over the
same inputs, all at once, and compares: the enrichment (lakehouse.joins.reconcile; and its
revenue view in the batch layer, lakehouse.joins.batch_reconcile), the windowed stream-stream
joins (lakehouse.joins.windowed_reconcile) and the commerce stream's
order state (lakehouse.commerce.rebuild, the event-sourced fold of the log). Each
judge gives one `JudgedOutput` per output table; this module runs every judge whose stream
has completed a batch, writes one row per output to dq.reconciliation_runs (`view` the
output, `batch` the recompute vs `stream`) and prints the summary. A run's rows carry its id
with a `joins:` prefix, so a joins run never replaces a reconcile or CDC run's rows; they are
written under the reconcile writer's lock, replacing the run id's earlier rows.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from lakehouse.core.config import Settings
from lakehouse.core.delta_io import overwrite_where, small_frame
from lakehouse.core.locks import exclusive_writer
from lakehouse.core.small_tables import has_rows
from lakehouse.core.tables import RECONCILE, Table, table
from lakehouse.reconcile.request import LOCK_WAIT_SECONDS

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

RUNS = table("dq.reconciliation_runs")
LEFT, RIGHT = "batch", "stream"
RUN_PREFIX = "joins:"


class NoJoinToJudge(Exception):
    """No join's stream has completed a batch yet: nothing to compare."""


@dataclass(frozen=True)
class JudgedOutput:
    """One join output against its recompute."""

    view: str  # the stream's table judged, without its stage: events_enriched
    unit: str  # what a compared row is: events, windows, pairs, orders
    compared: int  # rows either side has
    differing: int  # rows that differ and nothing recorded explains
    explained: int = 0  # rows that differ for a recorded reason (a late row, say)
    open: int = 0  # rows left out: not settled by the stream's last batch yet
    examples: Sequence[str] = ()  # the first differing rows, named by key
    as_of: str = ""  # which stream batch the comparison is as of
    as_of_time: datetime | None = None

    @property
    def passed(self) -> bool:
        return self.differing == 0

    @property
    def equal(self) -> int:
        return self.compared - self.differing - self.explained

    def difference_text(self) -> str:
        return f"{self.view}: {self.differing} of {self.compared} {self.unit} differ"


@dataclass(frozen=True)
class JoinsReconciliation:
    outputs: tuple[JudgedOutput, ...]
    not_started: tuple[str, ...] = field(default=())  # joins whose stream has no batch yet

    @property
    def passed(self) -> bool:
        return all(o.passed for o in self.outputs)


# A judge: the outputs of one join as of its stream's last batch; raises its own
# "nothing to reconcile" (named in NOTHING_YET) before the stream's first batch.
Judge = Callable[["SparkSession", Settings], list[JudgedOutput]]


def enrichment_judge(spark: SparkSession, settings: Settings) -> list[JudgedOutput]:
    from lakehouse.joins.reconcile import reconcile_enrichment

    judged = reconcile_enrichment(spark, settings)
    as_of = f"as of enrichment batch {judged.batch_id}"
    return [
        JudgedOutput(
            "events_enriched",
            "events",
            judged.events.compared,
            judged.events.differing,
            examples=tuple(judged.events.examples),
            as_of=as_of,
        ),
        JudgedOutput(
            "revenue_by_segment",
            "windows",
            judged.windows.compared,
            judged.windows.differing,
            examples=tuple(judged.windows.examples),
            as_of=as_of,
        ),
    ]


def enrichment_batch_judge(spark: SparkSession, settings: Settings) -> list[JudgedOutput]:
    """The batch layer's revenue view against the stream's, window by window, where both saw
    the same inputs (lakehouse.joins.batch_reconcile); the other final windows open."""
    from lakehouse.joins.batch_reconcile import reconcile_batch_revenue

    judged = reconcile_batch_revenue(spark, settings)
    as_of = f"as of enrichment batch {judged.batch_id}"
    return [
        JudgedOutput(
            "batch.revenue_by_segment",
            "windows",
            judged.compared,
            judged.differing,
            open=judged.open,
            examples=tuple(judged.examples),
            as_of="; ".join([as_of, *(f"open: {r}" for r in judged.reasons)]),
        )
    ]


class NotStarted(Exception):
    """A judge's stream has completed no batch yet."""


EXAMPLES = 5


def stream_joins_judge(spark: SparkSession, settings: Settings) -> list[JudgedOutput]:
    """The windowed stream-stream joins (lakehouse.joins.windowed_reconcile): each output
    against the batch join of its on-time input rows; the pairs a late row cost are
    explained, the orders whose hour the watermark has not passed open."""
    from lakehouse.joins.windowed import QUERIES
    from lakehouse.joins.windowed_reconcile import reconcile_windowed_joins

    outputs = {q.name: q.output.name.partition(".")[2] for q in QUERIES}
    judged = [v for v in reconcile_windowed_joins(spark, settings) if v.batch_id is not None]
    if not judged:
        raise NotStarted("the stream joins have completed no batch yet")
    return [
        JudgedOutput(
            outputs[v.query],
            "rows",
            v.compared,
            v.differing,
            explained=v.not_emitted_for_late,
            open=v.open_orders,
            examples=tuple(v.examples),
            as_of=f"as of {v.query} batch {v.batch_id} (watermark {v.watermark})",
        )
        for v in judged
    ]


def commerce_judge(spark: SparkSession, settings: Settings) -> list[JudgedOutput]:
    """The order state against the batch fold of bronze.commerce_raw, both as the commerce
    stream's last completed batch left them (lakehouse.commerce.rebuild.judge_live_state)."""
    from lakehouse.commerce.rebuild import differing_orders, judge_live_state

    judged = judge_live_state(spark, settings)
    differing, examples = differing_orders(judged.differences, EXAMPLES)
    return [
        JudgedOutput(
            "order_state",
            "orders",
            judged.orders,
            differing,
            examples=tuple(examples),
            as_of=f"as of commerce batch {judged.batch_id}",
        )
    ]


def judges() -> dict[str, Judge]:
    """Every join's judge, by the join's name."""
    return {
        "enrichment": enrichment_judge,
        "enrichment_batch": enrichment_batch_judge,
        "stream_joins": stream_joins_judge,
        "commerce": commerce_judge,
    }


def progress_tables() -> dict[str, Table]:
    """The table each join's stream appends a row to as a batch completes, by the join's name:
    before its first row the join has nothing to judge."""
    from lakehouse.commerce.outputs import CommerceOutputs
    from lakehouse.joins.outputs import EnrichmentOutputs
    from lakehouse.joins.windowed import PROGRESS

    return {
        "enrichment": EnrichmentOutputs.live().progress,
        "enrichment_batch": EnrichmentOutputs.live().progress,
        "stream_joins": PROGRESS,
        "commerce": CommerceOutputs.live().progress,
    }


def started_joins(settings: Settings, chosen: Sequence[str] = ()) -> list[str]:
    """The joins named in `chosen` (every one when empty) whose stream has completed a batch,
    read from their progress tables with delta-rs, without Spark."""
    progress = progress_tables()
    return [name for name in chosen or judges() if has_rows(settings, progress[name])]


def check_started(settings: Settings, chosen: Sequence[str] = ()) -> None:
    """NoJoinToJudge when none of the joins named in `chosen` (every one when empty) has
    completed a batch: a task with nothing to judge ends in a second, without starting a JVM."""
    if not started_joins(settings, chosen):
        raise NoJoinToJudge(none_started(list(chosen) or list(judges())))


def none_started(names: Sequence[str]) -> str:
    return f"no join's stream has completed a batch yet ({', '.join(names)})"


def nothing_yet() -> tuple[type[Exception], ...]:
    """The judges' own "no batch yet" errors."""
    from lakehouse.commerce.rebuild import NothingToCompare
    from lakehouse.joins.reconcile import NothingToReconcile

    return (NothingToReconcile, NothingToCompare, NotStarted)


def reconcile_joins(
    spark: SparkSession, settings: Settings, chosen: dict[str, Judge] | None = None
) -> JoinsReconciliation:
    """Every join's outputs against their recompute; NoJoinToJudge when no stream has run."""
    outputs: list[JudgedOutput] = []
    not_started: list[str] = []
    for name, judge in (chosen or judges()).items():
        try:
            outputs += judge(spark, settings)
        except nothing_yet():
            not_started.append(name)
    if not outputs:
        raise NoJoinToJudge(none_started(not_started))
    return JoinsReconciliation(tuple(outputs), tuple(not_started))


def compare_joins(
    spark: SparkSession,
    settings: Settings,
    run_id: str,
    started_at: datetime,
    chosen: Sequence[str] = (),
    record: bool = True,
) -> JoinsReconciliation:
    """The joins named in `chosen` (every one when empty) judged and, with `record`, their
    rows written. NoJoinToJudge when none has a batch; nothing is written then."""
    available = judges()
    picked = {name: available[name] for name in chosen} if chosen else available
    rec = reconcile_joins(spark, settings, picked)
    if record:
        write_records(spark, settings, rec, run_id, started_at)
    return rec


def recorded_run_id(run_id: str) -> str:
    return run_id if run_id.startswith(RUN_PREFIX) else f"{RUN_PREFIX}{run_id}"


def run_rows(
    spark: SparkSession, rec: JoinsReconciliation, run_id: str, started_at: datetime
) -> DataFrame:
    rows: list[dict[str, Any]] = [
        {
            "run_id": recorded_run_id(run_id),
            "view": o.view,
            "left_source": LEFT,
            "right_source": RIGHT,
            "started_at": started_at,
            "range_start": None,
            "range_end": o.as_of_time,
            "compared": o.compared,
            "equal": o.equal,
            "explained": o.explained,
            "unexplained": o.differing,
            "beyond_threshold": o.differing,
            "open": o.open,
            "verdict": "passed" if o.passed else "failed",
            "verdict_reasons": [] if o.passed else [o.difference_text()],
            "first_windows": list(o.examples),
            "thresholds": {},
            "max_unexplained_windows": 0,
            "report_path": None,
            "note": o.as_of,
        }
        for o in rec.outputs
    ]
    return small_frame(spark, rows, RUNS)


def write_records(
    spark: SparkSession,
    settings: Settings,
    rec: JoinsReconciliation,
    run_id: str,
    started_at: datetime,
) -> None:
    """Replace the run's rows, under the reconcile writer's lock (another reconciliation
    finishes in minutes)."""
    recorded = recorded_run_id(run_id).replace("\\", "\\\\").replace("'", "\\'")
    this_run = f"run_id = '{recorded}' AND right_source = '{RIGHT}'"
    with exclusive_writer(settings, RECONCILE, wait_seconds=LOCK_WAIT_SECONDS):
        overwrite_where(
            run_rows(spark, rec, run_id, started_at), RUNS, settings, RECONCILE, this_run
        )


COLUMNS = ("compared", "equal", "explained", "differ", "open")


def verdict_text(rec: JoinsReconciliation) -> str:
    if rec.passed:
        return "joins reconciliation passed: every join's output equals its recompute"
    differing = ", ".join(o.difference_text() for o in rec.outputs if not o.passed)
    return f"joins reconciliation failed: {differing}"


def summary_text(rec: JoinsReconciliation, run_id: str) -> str:
    """The terminal's summary: one line per output, the first differences, the verdict."""
    width = max([len(o.view) for o in rec.outputs] + [6])
    lines = [
        f"joins reconciliation {recorded_run_id(run_id)}: {LEFT} (recomputed from the "
        f"inputs) vs {RIGHT} (the join's stream)",
        f"  {'output':<{width}}  " + "  ".join(f"{c:>9}" for c in COLUMNS),
    ]
    for o in rec.outputs:
        values = (o.compared, o.equal, o.explained, o.differing, o.open)
        cells = "  ".join(f"{x:>9}" for x in values)
        lines.append(f"  {o.view:<{width}}  {cells}  {o.unit}, {o.as_of}")
    if rec.not_started:
        lines.append(f"  not judged (no batch yet): {', '.join(rec.not_started)}")
    shown = [f"  {o.view} {e}" for o in rec.outputs for e in o.examples]
    if shown:
        lines.append("first differences:")
        lines += shown
    lines.append(verdict_text(rec))
    return "\n".join(lines)


def failures(rec: JoinsReconciliation) -> list[str]:
    return [
        f"{o.difference_text()} (first: {'; '.join(o.examples)})"
        for o in rec.outputs
        if not o.passed
    ]


def result(rec: JoinsReconciliation, run_id: str, recorded: bool) -> dict[str, Any]:
    """What a caller reports (the job's result line)."""
    return {
        "run_id": recorded_run_id(run_id),
        "recorded": recorded,
        "passed": rec.passed,
        "verdict": verdict_text(rec),
        "failures": failures(rec),
        "not_started": list(rec.not_started),
        "outputs": {
            o.view: {
                "compared": o.compared,
                "equal": o.equal,
                "explained": o.explained,
                "differing": o.differing,
                "open": o.open,
                "as_of": o.as_of,
            }
            for o in rec.outputs
        },
    }
