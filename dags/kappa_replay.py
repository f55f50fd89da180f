"""Replay the Kafka log through the speed layer's code into a new version (jobs/replay.py)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, NoReturn

from airflow.sdk import Asset, Param, dag, get_current_context, task
from airflow.sdk.exceptions import AirflowSkipException

from dags.support.failure import Refused
from dags.support.form_fields import VERSION_RULE, mode_param, version_param

if TYPE_CHECKING:
    from dags.support.job_runner import RunJob

log = logging.getLogger("tributary.dags.kappa_replay")

# Each replay that wrote a version announces it here (the version in the event's extra); the
# reconcile DAG listens, and compares the version with the live output.
REPLAY_ASSET = Asset(name="replay.versions", uri="tributary://replay/versions")

DOC = """
### Kappa replay

Runs the speed layer's own code (`python -m jobs.replay`) over the Kafka log into a **new
version** of every table (`replay_<version>.*`), with its own checkpoint; the live stream
keeps running untouched. Progress (records done / total, rate) is in the `replay` task's log.

**Trigger** it with the form:

| field | meaning |
|---|---|
| Start | `earliest` (the whole log), `timestamp` (per partition) or explicit `offsets` |
| Timestamp / Offsets | for those starts; leave empty otherwise |
| Version | the new version's name; empty: the next `vN`; an interrupted one's name resumes it |
| Extend | instead of a new version: continue this one over the log written since its last run |
| Dry run | on by default: report what would be replayed, write nothing; untick it to replay |
| Auto-promote | promote the version when it has caught up and its reconciliation gate passes |
| Force | replay even though retention deleted part of the start (the gap is recorded) |

Before it starts, a **retention guard** checks the log still holds the start. Bad parameters
fail at once with the reason and change nothing. Promote or roll back later with the
`promote_version` and `rollback_version` DAGs; the **Tributary** view (in the navigation
bar) lists the versions and says what promoting each would change.

**Schedule**: daily. In `kappa` mode (config `mode`, or the Mode field for one run) the
scheduled run is the recomputation, a replay of the **recent log**: it extends the active
version over the records the log gained since that version's last run (from its own
checkpoint, in large micro-batches, so events the live stream found late are on time here).
The extension passes the same reconciliation gate as a promotion before serving reads it; if
it fails, serving keeps reading the version as it was and the `promote` task fails with the
reason. With no version active yet, it replays the whole log into a new version and promotes
it when its gate passes. In `lambda` mode the batch layer recomputes instead, and scheduled
runs skip.

Each version written is announced on the `replay.versions` asset, which triggers the
`reconcile` DAG: replay vs live, with its report and `dq.*` records.

**Joins**: the `joins` task replays into the version the joins the live platform runs, by
their streams' own code, and judges them: the commerce stream and the windowed stream-stream
joins (`python -m jobs.replay_joins`) once they have run live, the enrichment
(`python -m jobs.enrich_replay`) once it has. It fails, naming the job, when a version's join
differs from its judge; the views are promoted or not regardless.
"""


@dag(
    dag_id="kappa_replay",
    schedule="@daily",
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    max_active_runs=1,
    tags=["tributary", "kappa"],
    description="Replay the log into a new version; check it; promote it",
    doc_md=DOC,
    params={
        "start": Param(
            "earliest",
            type="string",
            enum=["earliest", "timestamp", "offsets"],
            title="Start",
            description="Where in the log to start: the earliest offset, a time, or offsets",
        ),
        "timestamp": Param(
            None,
            type=["null", "string"],
            format="date-time",
            title="Timestamp (UTC)",
            description="With start = timestamp: replay records from this time on",
        ),
        "offsets": Param(
            None,
            type=["null", "string"],
            title="Offsets",
            description='With start = offsets: JSON {"<partition>": <offset>}, e.g. {"0": 120}',
        ),
        "version": Param(
            None,
            type=["null", "string"],
            title="Version",
            description="Name of the new version, e.g. v7; empty: the next vN. A name is "
            + VERSION_RULE,
        ),
        "extend": version_param(
            None,
            "Extend version",
            "Instead of a new version: continue this one over the log written since its last "
            "run (Start stays earliest)",
        ),
        "dry_run": Param(
            True,
            type="boolean",
            title="Dry run",
            description="Only report what would be replayed; write nothing (on by default: "
            "untick it to replay; the scheduled run always replays)",
        ),
        "auto_promote": Param(
            False,
            type="boolean",
            title="Auto-promote",
            description="Promote the version if its reconciliation gate passes",
        ),
        "force": Param(
            False,
            type="boolean",
            title="Force",
            description="Replay what exists when retention deleted the start (gap recorded)",
        ),
        "mode": mode_param("a scheduled run extends the active version and serves it"),
    },
)
def kappa_replay() -> None:
    @task(execution_timeout=timedelta(hours=6))
    def replay() -> dict[str, Any]:
        return replay_log(get_current_context())

    @task(execution_timeout=timedelta(hours=1))
    def promote(replayed: dict[str, Any]) -> str:
        return promote_replayed(replayed)

    @task(outlets=[REPLAY_ASSET])
    def announce(replayed: dict[str, Any]) -> None:
        announce_version(replayed, get_current_context()["outlet_events"])

    @task(execution_timeout=timedelta(hours=6))
    def joins(replayed: dict[str, Any]) -> dict[str, Any]:
        return replay_version_joins(replayed)

    replayed = replay()
    # TaskFlow passes the XCom at run time; mypy sees the XComArg placeholder.
    announce(replayed)  # type: ignore[arg-type]
    promote(replayed)  # type: ignore[arg-type]
    joins(replayed)  # type: ignore[arg-type]


# The tasks' logic, callable with a context (tests run it in-process, with the job in-process
# too through `run`; Airflow's tasks run the job as a child process).


def replay_log(context: Mapping[str, Any], run: RunJob | None = None) -> dict[str, Any]:
    """The replay task: skip a scheduled run outside kappa mode, else run jobs.replay with
    the run's parameters; its summary for the next tasks."""
    from dags.support.job_runner import run_job
    from dags.support.results import VIEW_URL, link_results, save_plan
    from dags.support.run_params import checked_params
    from jobs.contract import Exit
    from lakehouse.core.config import get_settings

    params = checked_params(context)
    scheduled = context["dag_run"].run_type == "scheduled"
    mode = params.get("mode") or get_settings().mode
    if scheduled and mode != "kappa":
        # Airflow's task log shows only "Skipping task."; the reason goes in the log too.
        _skip(
            f"{mode} mode: the batch layer recomputes the views; scheduled replays run "
            "only in kappa mode (trigger this DAG by hand for a backfill)"
        )
    args = replay_arguments(params, scheduled=scheduled)
    outcome = (run or run_job)("jobs.replay", args, on_line=log.info)
    if outcome.returncode == Exit.BAD_REQUEST:
        raise outcome.refusal("the replay was refused")
    # Not served: written, so it is still announced; the promote task reports the gate.
    summary = outcome.summary("replay", succeeded=(Exit.OK, Exit.CHECKS_FAILED))
    summary["dry_run"] = bool(params["dry_run"]) and not scheduled
    if summary["dry_run"]:
        link_results(context, "the plan", save_plan(context, outcome.lines))
    else:
        link_results(context, "the versions", VIEW_URL + "#versions")
    summary["mode"] = mode  # the promotion gate compares with batch in lambda mode
    summary["auto_promote"] = bool(params["auto_promote"]) or scheduled
    return summary


def promote_replayed(replayed: dict[str, Any], run: RunJob | None = None) -> str:
    """The promote task: promote what the replay wrote when asked to, or say why not."""
    from dags.support.job_runner import run_job
    from jobs.contract import Exit

    if replayed["dry_run"]:
        _skip("dry run: nothing to promote")
    if replayed.get("active") and replayed.get("served"):
        _skip(f"{replayed['version']} is the active version and passed its gate: served")
    if replayed.get("active"):
        # The note says since when serving has read it so, and warns after a week.
        raise Refused(
            f"{replayed['version']} was extended but its reconciliation gate failed (see "
            "the replay task's log and the reconcile DAG's report). "
            f"{replayed.get('unserved') or ''}\nPromote it with promote_version (Force to "
            "serve it anyway) once the cause is understood."
        )
    if not replayed["auto_promote"]:
        _skip(
            f"auto-promote is off: promote {replayed['version']} with the promote_version "
            "DAG when you are ready"
        )
    outcome = (run or run_job)(
        "jobs.versions",
        ["promote", replayed["version"]],
        on_line=log.info,
        extra_env={"TRIBUTARY__MODE": replayed["mode"]},
    )
    if outcome.returncode in (Exit.BAD_REQUEST, Exit.CHECKS_FAILED):
        raise Refused(f"{replayed['version']} was not promoted: its gate failed (see above)")
    if outcome.returncode != Exit.OK:
        raise outcome.failure("jobs.versions")
    return str(replayed["version"])


def announce_version(replayed: dict[str, Any], outlet_events: Any) -> None:
    """The announce task: the version written, on the asset the reconcile DAG listens to."""
    if replayed["dry_run"]:
        _skip("dry run: no version was written")
    if replayed.get("new_records") == 0:
        _skip(f"{replayed['version']} had nothing new to read: nothing changed")
    outlet_events[REPLAY_ASSET].extra = {"version": replayed["version"]}


# The jobs that replay a version's joins, each with the joins it replays
# (lakehouse.reconcile.joins' names): a version replays the joins the live platform runs.
VERSION_JOINS = (
    ("replay_joins", ("stream_joins", "commerce")),
    ("enrich_replay", ("enrichment",)),
)


def replay_version_joins(replayed: dict[str, Any], run: RunJob | None = None) -> dict[str, Any]:
    """The joins task: the joins the live platform runs, replayed into the version written and
    judged (jobs.replay_joins: the commerce stream and the windowed joins; jobs.enrich_replay:
    the enrichment). Skipped after a dry run, a replay with nothing new, or when no join runs
    live; failed, naming the job, when a version's join differs from its judge."""
    from dags.support.job_runner import run_job
    from jobs.contract import Exit
    from lakehouse.core.config import get_settings
    from lakehouse.reconcile.joins import started_joins

    if replayed["dry_run"]:
        _skip("dry run: no version was written")
    version = str(replayed["version"])
    if replayed.get("new_records") == 0:
        _skip(f"{version} had nothing new to read: its joins are as they were")
    live = started_joins(get_settings())
    wanted = [job for job, joins in VERSION_JOINS if set(joins) & set(live)]
    if not wanted:
        _skip(
            "no join runs live (the stream joins, the commerce stream, the enrichment): "
            f"{version} has none to replay"
        )
    results: dict[str, Any] = {}
    differing = []
    for job in wanted:
        outcome = (run or run_job)(f"jobs.{job}", [version], on_line=log.info)
        if outcome.returncode == Exit.NOTHING_TO_DO:
            results[job] = {"skipped": outcome.reason()}
            continue
        results[job] = outcome.summary(job, succeeded=(Exit.OK, Exit.CHECKS_FAILED))
        if outcome.returncode == Exit.CHECKS_FAILED:
            differing.append(f"jobs.{job}: {version}'s joins differ from their judges")
    if differing:
        raise Refused("\n".join([*differing, "(the first differing rows are in the log above)"]))
    return results


def replay_arguments(params: Mapping[str, Any], scheduled: bool) -> list[str]:
    """jobs.replay's arguments for a run. The scheduled run (kappa mode only) extends the
    active version; a triggered one passes the form on, and the job refuses what conflicts."""
    if scheduled:
        return ["--scheduled"]
    args = ["--extend", str(params["extend"])] if params.get("extend") else []
    if not (params.get("extend") and params["start"] == "earliest"):
        args += ["--start", params["start"]]
    for name in ("timestamp", "offsets", "version"):
        if params.get(name):
            args += [f"--{name}", str(params[name])]
    args += [f"--{flag.replace('_', '-')}" for flag in ("dry_run", "force") if params[flag]]
    return args


def _skip(reason: str) -> NoReturn:
    log.info(reason)
    raise AirflowSkipException(reason)


kappa_replay()
