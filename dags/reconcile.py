"""Reconciles batch vs speed after every batch run, and on demand (jobs/reconcile.py)."""

from __future__ import annotations

import logging
import operator
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from functools import reduce
from typing import TYPE_CHECKING, Any

from airflow.sdk import Asset, Param, dag, get_current_context, task
from airflow.sdk.exceptions import AirflowSkipException

from dags.support.failure import Refused, retry_policy
from dags.support.form_fields import VERSION_RULE, existing_versions

if TYPE_CHECKING:
    from dags.support.job_runner import RunJob

log = logging.getLogger("tributary.dags.reconcile")

# lakehouse.transforms.views.VIEWS and lakehouse.reconcile NAMED_SOURCES; not imported, as DAG files
# import lakehouse only in tasks.
VIEWS = ["event_counts_1m", "active_users_10m", "user_sessions"]
SOURCES = ["batch", "speed", *(f"replay:{v}" for v in existing_versions())]
# The batch_layer DAG's outlets. `&`, all of them: its one task updates the three together,
# so each batch run triggers exactly one reconciliation (with `|`, each asset event could
# start a run of its own).
BATCH_ASSETS = [Asset(name=f"batch.{v}", uri=f"tributary://batch/{v}") for v in VIEWS]
# kappa_replay's announcement of a new version (the version in the event's extra).
REPLAY_ASSET = Asset(name="replay.versions", uri="tributary://replay/versions")

DOC = """
### Reconcile

Compares two sources of the views **window by window** (`python -m jobs.reconcile`): for
every key final on both sides, both values, the difference, and whether the late events
explain it (`batch = speed + late`). Results go to `dq.reconciliation_runs` and
`dq.reconciliation_windows` (keyed by this run's id) and to an **HTML report**
(`<state>/dq/reports/<run id>.html`, path in the task log: `reconcile report: ...`).

- **After every batch run**: triggered by the batch layer's assets (`batch.<view>`), it
  compares batch vs speed over the interval(s) those batch runs recomputed.
- **After every replay**: triggered by `replay.versions` (kappa_replay announces each
  version it wrote), it compares that version with the live output (replay vs speed).
  A run triggered by both compares each; it fails if any comparison's gate fails. An
  announced version the lakehouse no longer holds (a reset lakehouse) is logged and skipped.
- **By hand**: *Trigger DAG* with `left`/`right` (batch, speed, or a replay version as
  `replay:v3`: replay vs live, replay vs batch), a `view` (or all), and an optional
  `start`/`end` range (UTC; empty: every final window).

The **joins** task, beside it, judges every join's outputs (`python -m jobs.joins_reconcile`:
the enrichment and its revenue view, ...) against their recompute from the same inputs, as of
each join stream's last batch, recorded in `dq.reconciliation_runs` as `joins:<run id>`. It
fails naming the output that differs and its first rows; it is skipped while no join's stream
has completed a batch.

The compare task **fails** when more windows than `dq.max_unexplained_windows` have a difference no
late event explains beyond the metric's threshold (`dq.thresholds` in config/base.yaml;
counts are exact by default); the message gives the count and the first windows. It is
**skipped** when no window is final on both sides yet. A failed gate blocks promotion.
"""


@dag(
    dag_id="reconcile",
    schedule=reduce(operator.and_, BATCH_ASSETS) | REPLAY_ASSET,
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    max_active_runs=1,
    # A retry helps when Spark or storage hiccup; a failed gate fails at once (no retry).
    default_args={
        "retries": 1,
        "retry_delay": timedelta(minutes=1),
        "retry_policy": retry_policy(),
    },
    tags=["tributary", "data-quality"],
    description="Batch vs speed per window after each batch run: dq.* records, HTML report, gate",
    doc_md=DOC,
    params={
        # A list to pick from (the replay versions that exist included), or any replay:<name>.
        "left": Param(
            "batch",
            type="string",
            examples=SOURCES,
            title="Left side",
            description="batch, speed (live) or replay:<version> (a version's name is "
            f"{VERSION_RULE})",
        ),
        "right": Param(
            "speed",
            type="string",
            examples=SOURCES,
            title="Right side",
            description="batch, speed (live) or replay:<version> (a version's name is "
            f"{VERSION_RULE})",
        ),
        "view": Param("all", enum=["all", *VIEWS], title="View"),
        "start": Param(
            None,
            type=["null", "string"],
            format="date-time",
            title="Start (UTC)",
            description="Empty: every final window (or the triggering batch runs' intervals)",
        ),
        "end": Param(
            None,
            type=["null", "string"],
            format="date-time",
            title="End (UTC)",
            description="Empty: up to the newest final window. Else the end, exclusive",
        ),
    },
)
def reconcile() -> None:
    @task(execution_timeout=timedelta(hours=1))
    def compare() -> dict[str, Any]:
        return compare_sources(get_current_context())

    # Beside compare: every join's outputs against their recompute (jobs.joins_reconcile),
    # recorded under this run's id; skipped while no join's stream has a batch.
    @task(execution_timeout=timedelta(minutes=30))
    def joins() -> dict[str, Any]:
        from dags.support.judges import run_judge

        return run_judge("joins_reconcile", get_current_context(), log)

    compare()
    joins()


def compare_sources(context: Mapping[str, Any], run: RunJob | None = None) -> dict[str, Any]:
    """The compare task (callable with a context; tests run it in-process, with the job in
    process too through `run`): one jobs.reconcile per comparison; fails if any gate fails,
    skips if nothing was final on both sides."""
    from dags.support.job_runner import run_job
    from dags.support.results import link_results, results_url
    from dags.support.run_params import checked_params
    from jobs.contract import Exit

    checked_params(context)
    summaries: dict[str, Any] = {}
    failures: list[str] = []
    for index, (label, arguments, announced) in enumerate(_comparisons(context)):
        # The first comparison is recorded under the run's id, the others beside it.
        left = arguments[1].replace(":", "_")
        run_id = context["run_id"] if index == 0 else f"{context['run_id']}:{left}"
        args = [*arguments, "--run-id", run_id]
        log.info("%s: running jobs.reconcile %s", label, " ".join(args))
        outcome = (run or run_job)("jobs.reconcile", args, log.info)
        if outcome.returncode == Exit.NOTHING_TO_DO:
            log.info("%s: no window is final on both sides yet: nothing compared", label)
            continue
        if outcome.returncode == Exit.BAD_REQUEST and announced:
            # The DAG wrote these arguments: only the version can be refused, one the lakehouse
            # no longer holds. An old announcement must not fail the comparisons queued with it.
            log.warning("%s: the announced version is not in the lakehouse: skipped", label)
            continue
        if outcome.returncode == Exit.BAD_REQUEST:
            raise outcome.refusal(f"{label}: bad parameters")
        result = outcome.summary("reconcile", succeeded=(Exit.OK, Exit.CHECKS_FAILED))
        log.info("reconciliation report: %s", result["report"])
        link_results(context, f"{label}: report", results_url(result["report"]))
        if outcome.returncode == Exit.CHECKS_FAILED:
            failures.append(f"{label}: {result['gate']}\nreport: {result['report']}")
            continue
        summaries[label] = result
    if failures:
        raise Refused("\n\n".join(failures))
    if not summaries:
        raise AirflowSkipException("no window is final on both sides yet: nothing compared")
    return summaries


def _comparisons(context: Any) -> list[tuple[str, list[str], bool]]:
    """What this run compares, (label, jobs.reconcile arguments, announced by a replay): the
    form's choice, or what triggered it. Batch runs: batch vs speed over what they
    recomputed. Each replay announced: that version vs live."""
    events = context.get("triggering_asset_events") or {}
    replayed = dict.fromkeys(
        str(e.extra["version"]) for e in events.get(REPLAY_ASSET, ()) if e.extra.get("version")
    )
    batch_triggered = any(events.get(asset) for asset in BATCH_ASSETS)
    found = []
    if batch_triggered or not replayed:
        params = context["params"]
        found.append((f"{params['left']} vs {params['right']}", _arguments(context), False))
    found += [
        (f"replay:{v} vs speed", ["--left", f"replay:{v}", "--right", "speed"], True)
        for v in replayed
    ]
    return found


def _arguments(context: Any) -> list[str]:
    params = context["params"]
    events = context.get("triggering_asset_events") or {}
    args = ["--left", params["left"], "--right", params["right"]]
    if params.get("view") and params["view"] != "all":
        args += ["--view", params["view"]]
    if params.get("start"):
        args += ["--from", str(params["start"])]
    if params.get("end"):
        args += ["--to", str(params["end"])]
    if not (params.get("start") or params.get("end")):
        # Asset-triggered: what the triggering batch runs just recomputed.
        batch_runs = sorted(
            {
                event.source_run_id
                for asset in BATCH_ASSETS
                for event in events.get(asset, ())
                if event.source_run_id
            }
        )
        for run_id in batch_runs:
            args += ["--batch-run", run_id]
    return args


reconcile()
