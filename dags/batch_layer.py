"""Recomputes the views, complete, from bronze for each hour (jobs/batch_layer.py)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from airflow.sdk import Asset, Param, dag, get_current_context, task
from airflow.sdk.exceptions import AirflowSkipException
from airflow.timetables.interval import CronDataIntervalTimetable

from dags.support.failure import Refused, retry_policy
from dags.support.form_fields import mode_param

if TYPE_CHECKING:
    from dags.support.job_runner import RunJob

log = logging.getLogger("tributary.dags.batch_layer")

# lakehouse.transforms.views.VIEWS; not imported, as DAG files import lakehouse only in tasks.
VIEWS = ["event_counts_1m", "active_users_10m", "user_sessions"]
# One asset per batch view, so reconciliation can be scheduled on data, not on time.
ASSETS = [Asset(name=f"batch.{v}", uri=f"tributary://batch/{v}") for v in VIEWS]
REVENUE_ASSET = Asset(name="batch.revenue_by_segment", uri="tributary://batch/revenue_by_segment")

DOC = """
### Batch layer

Every hour, recomputes the speed layer's views **complete** (late events included) from
`bronze.events_raw`, for this run's **data interval** `[data_interval_start,
data_interval_end)`, with the speed layer's own parse / validate / dedup / window code
(`python -m jobs.batch_layer`).

- Output: `batch.event_counts_1m`, `batch.active_users_10m`, `batch.user_sessions`. Only the
  interval's rows are replaced (Delta `replaceWhere`): a rerun or a retry gives the same
  tables, and intervals never touch each other's rows.
- Each run is recorded in `ops.batch_runs` (bronze version read, and per view the mark up to
  which results are final); the serving layer (`python -m jobs.cli query ...`) serves batch
  results up to there and speed results after.
- Each view is published as an Airflow asset (`batch.<view>`) for reconciliation.
- Files that reruns replaced a week ago (config `batch.vacuum_after_hours`) are deleted at
  the end of a run, from each table at most once a day (`batch.vacuum_every_hours`).
- **Past intervals**: *Trigger DAG* with a logical date, or fill *start*/*end* in the form
  (UTC, whole minutes) to recompute any closed range at once; or a backfill
  (`airflow backfill create --dag-id batch_layer --from-date ... --to-date ...`, or the
  API). An interval without events is skipped (nothing written); a reversed or future one
  fails at once with the reason.
- **Run twice** (a triggered run beside the scheduled one, a backfill over hours done
  already): an interval whose last run still stands (nothing within its reach appended to
  bronze since, every view final) is skipped with the run it stands on; tick *Force* to
  recompute it anyway.
- **The revenue view** (`revenue` task, after the views): `batch.revenue_by_segment`,
  purchases and revenue per hour, user segment and product category, recomputed from bronze
  and the dimensions' history tables (`python -m jobs.batch_revenue`) and recorded in
  `ops.batch_runs` for the serving layer. Skipped, saying so, while the enrichment stream
  (the `enrichment` DAG) has never run, and when the interval's last run stands (bronze
  unchanged since it, every window final, the history tables at the versions it joined):
  *Force* recomputes it anyway.
- **Kappa mode** (config `mode: kappa`, or the Mode field for one run): runs do nothing and
  say so in the log; the `kappa_replay` DAG's scheduled replay is the recomputation instead.
"""


@dag(
    dag_id="batch_layer",
    schedule=CronDataIntervalTimetable("0 * * * *", timezone="UTC"),
    start_date=datetime(2024, 1, 1, tzinfo=UTC),
    catchup=False,
    max_active_runs=1,
    default_args={
        "retries": 2,
        "retry_delay": timedelta(minutes=1),
        "retry_policy": retry_policy(),
    },
    tags=["tributary", "batch"],
    description="Hourly: recompute the views complete from bronze for the data interval",
    doc_md=DOC,
    params={
        "start": Param(
            None,
            type=["null", "string"],
            format="date-time",
            title="Start (UTC)",
            description="Empty: the run recomputes its Data Interval (above), which for a "
            "Logical Date L is the last whole hour before L: at 14:20, 13:00 to 14:00. Else "
            "the first instant to recompute",
        ),
        "end": Param(
            None,
            type=["null", "string"],
            format="date-time",
            title="End (UTC)",
            description="Empty: the end of the Data Interval (above). Else the end, exclusive",
        ),
        "force": Param(
            False,
            type="boolean",
            title="Force",
            description="Recompute even if the interval's last run still stands (nothing "
            "within its reach appended to bronze since): after changing the views' code or "
            "the lateness settings",
        ),
        "mode": mode_param("this run does nothing: there is no batch layer"),
    },
)
def batch_layer() -> None:
    @task(outlets=ASSETS, execution_timeout=timedelta(hours=2))
    def recompute() -> dict[str, Any]:
        return recompute_run_interval(get_current_context())

    # After the views, whether they were recomputed or found unchanged.
    @task(outlets=[REVENUE_ASSET], execution_timeout=timedelta(hours=2), trigger_rule="none_failed")
    def revenue() -> dict[str, Any]:
        return recompute_run_revenue(get_current_context())

    recompute() >> revenue()


def recompute_run_interval(context: Mapping[str, Any], run: RunJob | None = None) -> dict[str, Any]:
    """The recompute task (callable with a context; tests run it in-process, with the job in
    process too through `run`): skip in kappa mode, else run jobs.batch_layer over the
    interval and name it on the assets' events."""
    from dags.support.job_runner import run_job
    from dags.support.run_params import checked_params
    from jobs.contract import Exit, read_result
    from lakehouse.core.config import get_settings

    mode = checked_params(context).get("mode") or get_settings().mode
    if mode == "kappa":
        log.info("kappa mode: there is no batch layer; corrections come from replays")
        raise AirflowSkipException(
            "kappa mode: no batch recomputation (the kappa_replay DAG replays the log "
            "instead); set mode: lambda in config/ to bring the batch layer back"
        )
    start, end = _interval(context)
    force = ["--force"] if context["params"].get("force") else []
    outcome = (run or run_job)(
        "jobs.batch_layer",
        ["--start", start, "--end", end, "--run-id", context["run_id"], *force],
        on_line=log.info,
    )
    # The run whose results stand, when the job found the interval unchanged.
    standing = (read_result("batch", outcome.lines) or {}).get("standing_run")
    if outcome.returncode == Exit.NOTHING_TO_DO and standing == context["run_id"]:
        # The interval's standing run is this one: an earlier try recomputed and recorded it
        # but never ended (its supervisor died with a killed scheduler, and Airflow runs the
        # task again), or the task was cleared. This try ends the run as that one would have.
        log.info("an earlier try of this run recomputed the interval; announcing it")
        summary: dict[str, Any] = {"run_id": context["run_id"], "recorded_by_earlier_try": True}
    elif outcome.returncode == Exit.NOTHING_TO_DO:
        # No events in the interval, or another run's results stand: the job's line says which.
        raise AirflowSkipException(outcome.reason())
    elif outcome.returncode == Exit.BAD_REQUEST:
        raise outcome.refusal(f"bad interval [{start}, {end})")
    else:
        summary = outcome.summary("batch")
    # Consumers of the assets (data_quality) learn which interval was recomputed.
    for asset in ASSETS:
        context["outlet_events"][asset].extra = {"interval_start": start, "interval_end": end}
    return summary


def recompute_run_revenue(context: Mapping[str, Any], run: RunJob | None = None) -> dict[str, Any]:
    """The revenue task (callable as recompute_run_interval is): skip in kappa mode and while
    the enrichment stream has never run, else run jobs.batch_revenue over the interval and
    name it on the asset's event (skip when another run's rows stand)."""
    from dags.support.job_runner import run_job
    from dags.support.run_params import checked_params
    from jobs.contract import Exit, read_result
    from lakehouse.core.config import get_settings
    from lakehouse.core.small_tables import has_rows
    from lakehouse.joins.outputs import EnrichmentOutputs

    settings = get_settings()
    if (checked_params(context).get("mode") or settings.mode) == "kappa":
        raise AirflowSkipException("kappa mode: no batch recomputation of the revenue view")
    if not has_rows(settings, EnrichmentOutputs.live().progress):
        raise AirflowSkipException(
            "the enrichment stream has never run (the enrichment DAG starts it): no revenue "
            "view to recompute"
        )
    start, end = _interval(context)
    force = ["--force"] if context["params"].get("force") else []
    outcome = (run or run_job)(
        "jobs.batch_revenue",
        ["--start", start, "--end", end, "--run-id", context["run_id"], *force],
        on_line=log.info,
    )
    standing = (read_result("batch_revenue", outcome.lines) or {}).get("standing_run")
    if outcome.returncode == Exit.NOTHING_TO_DO and standing == context["run_id"]:
        # An earlier try of this run recorded it (as for the views, above).
        log.info("an earlier try of this run recomputed the interval; announcing it")
        summary: dict[str, Any] = {"run_id": context["run_id"], "recorded_by_earlier_try": True}
    elif outcome.returncode == Exit.NOTHING_TO_DO:
        raise AirflowSkipException(outcome.reason())
    elif outcome.returncode == Exit.BAD_REQUEST:
        raise outcome.refusal(f"bad interval [{start}, {end})")
    else:
        summary = outcome.summary("batch_revenue")
    context["outlet_events"][REVENUE_ASSET].extra = {"interval_start": start, "interval_end": end}
    return summary


def _interval(context: Any) -> tuple[str, str]:
    params = context["params"]
    if params.get("start") or params.get("end"):
        if not (params.get("start") and params.get("end")):
            raise Refused("give both start and end, or neither")
        return str(params["start"]), str(params["end"])
    start, end = context.get("data_interval_start"), context.get("data_interval_end")
    if start is None or end is None or start >= end:
        raise Refused(
            "this run has no data interval to recompute: trigger it with a logical date, "
            "or fill start and end in the form"
        )
    return start.isoformat(), end.isoformat()


batch_layer()
