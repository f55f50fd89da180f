"""Validates the lakehouse with its Great Expectations suites after every batch run, and on
demand (jobs/quality.py)."""

from __future__ import annotations

import logging
import operator
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from functools import reduce
from typing import TYPE_CHECKING, Any

from airflow.sdk import Asset, Param, dag, get_current_context, task

from dags.support.failure import Refused, retry_policy

if TYPE_CHECKING:
    from dags.support.job_runner import RunJob

log = logging.getLogger("tributary.dags.data_quality")

# lakehouse.transforms.views.VIEWS and lakehouse.quality.runs.LAYERS; not imported, as DAG files
# import lakehouse and jobs only in tasks.
VIEWS = ["event_counts_1m", "active_users_10m", "user_sessions"]
LAYERS = ["all", "bronze", "silver", "quarantine", "speed", "batch"]
# The batch_layer DAG's outlets. `|`: any of them is enough (the batch run updates the three
# together; max_active_runs=1 keeps their events from piling up runs).
BATCH_ASSETS = [Asset(name=f"batch.{v}", uri=f"tributary://batch/{v}") for v in VIEWS]
ANY_BATCH_ASSET = reduce(operator.or_, BATCH_ASSETS)

DOC = """
### Data quality

Runs the **Great Expectations** suites (`lakehouse/quality/suites.py`) on the Delta
snapshot of each table of a layer (`python -m jobs.quality`): bronze (`bronze.events_raw`),
quarantine (`bronze.quarantine`), silver (`silver.events`), the speed and batch views.
A table that does not exist yet is skipped. Only the rows in the range are validated
(bronze, quarantine and silver rows by arrival time, the views by window or session start).

Each check has an action:

- **fail**: the table is wrong (a pipeline bug). The task **fails**, naming the broken checks
  with their counts and first examples.
- **warn**: suspicious but usable; the run succeeds and the summary says so.
- **quarantine**: the offending rows are written to `dq.quality_quarantine` (table, version,
  the row as JSON, its `dq:<check>` reasons). The table itself is left to its one writer.

Every run adds one row per table to `dq.quality_runs` (verdict, broken checks, seconds, Data
Docs page), keyed by the run id: a retry writes nothing twice.

**Data Docs**: the task log ends with `Data Docs: <path>/index.html`, the Great Expectations
site listing every run (open the file in a browser; default `<state>/dq/data_docs`).

- **After every batch run**: triggered by any of the batch layer's assets (`batch.<view>`),
  validates every layer over the interval(s) those batch runs recomputed (each asset event
  carries its interval).
- **By hand**: *Trigger DAG* with a `layer` and an optional `start`/`end` range (UTC;
  empty: the 2 days before the run).
"""


@dag(
    dag_id="data_quality",
    schedule=ANY_BATCH_ASSET,
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    max_active_runs=1,
    # A retry helps when Spark or storage hiccup; a broken FAIL check fails at once.
    default_args={
        "retries": 1,
        "retry_delay": timedelta(minutes=1),
        "retry_policy": retry_policy(),
    },
    tags=["tributary", "data-quality"],
    description="Great Expectations suites per layer: fail, warn or quarantine; Data Docs",
    doc_md=DOC,
    params={
        "layer": Param("all", enum=LAYERS, title="Layer", description="The tables to validate"),
        "start": Param(
            None,
            type=["null", "string"],
            format="date-time",
            title="From (UTC)",
            description="Empty: 2 days before the end. Else the first instant validated",
        ),
        "end": Param(
            None,
            type=["null", "string"],
            format="date-time",
            title="To (UTC)",
            description="Empty: when the run was triggered. Else the end, exclusive",
        ),
    },
)
def data_quality() -> None:
    @task(execution_timeout=timedelta(hours=1))
    def validate() -> dict[str, Any]:
        return validate_layer(get_current_context())

    validate()


def validate_layer(context: Mapping[str, Any], run: RunJob | None = None) -> dict[str, Any]:
    """The validate task (callable with a context; tests run it in-process, with the job in
    process too through `run`): jobs.quality over the run's range; a broken FAIL check fails
    the run at once, naming every broken check and the Data Docs."""
    from dags.support.job_runner import run_job
    from dags.support.results import link_results, results_url
    from dags.support.run_params import checked_params
    from jobs.contract import Exit

    checked_params(context)
    args = [*_arguments(context), "--run-id", context["run_id"]]
    log.info("running jobs.quality %s", " ".join(args))
    outcome = (run or run_job)("jobs.quality", args, on_line=log.info)
    if outcome.returncode == Exit.BAD_REQUEST:
        raise outcome.refusal("bad parameters")
    result = outcome.summary("quality", succeeded=(Exit.OK, Exit.CHECKS_FAILED))
    if result["data_docs"]:
        log.info("Data Docs: %s", result["data_docs"])
        link_results(context, "Data Docs", results_url(result["data_docs"]))
    if outcome.returncode == Exit.CHECKS_FAILED:
        raise Refused(
            "data quality: FAIL checks broke:\n"
            + "\n".join(f"  {b}" for b in result["failed_checks"])
            + f"\nData Docs: {result['data_docs']}"
        )
    return result


def _arguments(context: Any) -> list[str]:
    """The job's arguments: the form's range; else the intervals the triggering batch runs
    recomputed; else the 2 days before the run was triggered (so a retry validates the same
    rows)."""
    params = context["params"]
    args = ["--layer", params.get("layer") or "all"]
    start, end = params.get("start"), params.get("end")
    if not (start or end):
        start, end = _recomputed_range(context) or (None, None)
    args += ["--to", str(end or _run_after(context).isoformat())]
    if start:
        args += ["--from", str(start)]
    return args


def _recomputed_range(context: Any) -> tuple[str, str] | None:
    """The span of the intervals named by the triggering asset events (batch_layer sets them
    in each event's extra), or None for a run not triggered by the batch layer."""
    events = context.get("triggering_asset_events") or {}
    intervals = [
        (e.extra["interval_start"], e.extra["interval_end"])
        for asset in BATCH_ASSETS
        for e in events.get(asset, ())
        if e.extra and {"interval_start", "interval_end"} <= e.extra.keys()
    ]
    if not intervals:
        return None
    from lakehouse.core.times import parse_iso

    return (
        min((s for s, _ in intervals), key=parse_iso),
        max((e for _, e in intervals), key=parse_iso),
    )


def _run_after(context: Any) -> datetime:
    run = context.get("dag_run")
    moment = getattr(run, "run_after", None) or context.get("logical_date")
    if moment is None:
        raise Refused("this run has no trigger time: fill start and end in the form")
    return moment


data_quality()
