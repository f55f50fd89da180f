"""Running a kappa replay: the speed layer's own query over the Kafka log into a version.

A new replay writes `replay_<version>.*` (quarantine, silver, the views, late events,
progress; no copy of the log, which live bronze keeps) with its own checkpoint and writer id,
beside the live stream. Interrupted, it resumes from its checkpoint when run again with the
same version. An extension continues a caught-up version over what the log gained since its
last run; an extension of the active version is served only once it passes the promotion gate.
"""

from __future__ import annotations

import ast
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from lakehouse.core.config import Settings
from lakehouse.core.kafka_io import check_broker
from lakehouse.core.locks import exclusive_writer
from lakehouse.core.paths import state_dir
from lakehouse.core.spark import get_spark
from lakehouse.core.storage import ensure_bucket
from lakehouse.core.tables import REPLAY
from lakehouse.replay.plan import (
    ReplayPlan,
    ReplayRequestError,
    ReplayStart,
    check_version_name,
    measured_rate,
    plan_extension,
    plan_replay,
    records_done,
)
from lakehouse.replay.promotion import advance_extension
from lakehouse.replay.versions import (
    LIVE,
    VersionInfo,
    active_version,
    list_versions,
    next_version,
    pinned_since,
    pinned_table_versions,
    pointer_history,
    record_version_event,
    unserved_note,
)
from lakehouse.speed.outputs import SpeedOutputs
from lakehouse.speed.stream import (
    QueryFailedError,
    StopRequest,
    await_end,
    run_until_stopped,
    start_query,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import StreamingQuery

Say = Callable[[str], None]


@dataclass(frozen=True)
class ReplayRequest:
    """What to replay. `extend` or `scheduled`: continue from where a version ended (the
    scheduled run extends the active version, or replays the whole log when none is)."""

    start: ReplayStart = field(default_factory=lambda: ReplayStart("earliest"))
    version: str | None = None
    topic: str | None = None
    live: bool = False
    dry_run: bool = False
    force: bool = False
    max_offsets_per_trigger: int | None = None
    extend: str | None = None
    scheduled: bool = False

    @property
    def continues(self) -> bool:
        return bool(self.extend or self.scheduled)


@dataclass(frozen=True)
class ReplayOutcome:
    """How a replay ended. `result` is what its caller reports (None: it stopped early or
    failed); `failure` the error a failed query stopped on."""

    status: Literal["planned", "nothing_new", "stopped", "failed", "caught_up"]
    version: str | None
    result: dict[str, Any] | None = None
    failure: str | None = None

    @property
    def not_served(self) -> bool:
        """An extension of the active version was written but failed its gate."""
        return bool(self.result and self.result.get("active") and not self.result["served"])


def replay(
    settings: Settings,
    request: ReplayRequest,
    say: Say = print,
    on_result: Callable[[dict[str, Any]], None] | None = None,
) -> ReplayOutcome:
    """Plan and run `request`. `on_result` gets the result as soon as there is one: a live
    replay goes on consuming after it, until it is stopped."""
    if request.max_offsets_per_trigger is not None and request.max_offsets_per_trigger < 1:
        raise ReplayRequestError("--max-offsets-per-trigger must be at least 1")
    if request.continues:
        outcome = continue_log(
            settings,
            request.extend,
            request.dry_run,
            request.max_offsets_per_trigger,
            say,
            on_result,
        )
    else:
        if request.version:
            check_version_name(request.version)
        topic = request.topic or settings.kafka.topic
        rate = measured_rate(settings)
        plan = plan_replay(settings, topic, request.start, force=request.force, rate=rate)
        if request.dry_run:
            outcome = planned(plan, request.version, say)
        else:
            if settings.storage.on_s3:
                ensure_bucket(settings)
            with exclusive_writer(settings, REPLAY):
                spark = get_spark(REPLAY, settings)
                version = version_to_write(spark, settings, request.version)
                return run_replay(
                    spark,
                    settings,
                    plan,
                    version,
                    request.live,
                    request.max_offsets_per_trigger,
                    say=say,
                    on_result=on_result,
                )
    # A run's result was handed over by run_replay; a plan's or an empty extension's is here.
    if outcome.status in ("planned", "nothing_new") and on_result is not None:
        assert outcome.result is not None
        on_result(outcome.result)
    return outcome


def continue_log(
    settings: Settings,
    extend: str | None,
    dry_run: bool,
    max_offsets: int | None = None,
    say: Say = print,
    on_result: Callable[[dict[str, Any]], None] | None = None,
) -> ReplayOutcome:
    """Extend `extend`; or, with None (the scheduled run), the active version, or the whole
    log into the next version when none is active yet."""
    if settings.storage.on_s3:
        ensure_bucket(settings)
    check_broker(settings)  # the plan needs it, and comes after Spark has started
    rate = measured_rate(settings)
    with contextlib.ExitStack() as held:
        if not dry_run:
            held.enter_context(exclusive_writer(settings, REPLAY))
        spark = get_spark(REPLAY, settings)
        version = extend or active_version(settings)
        if version == LIVE:
            say("no replay version is active yet: replaying the whole log into a new one")
            plan = plan_replay(settings, settings.kafka.topic, ReplayStart("earliest"), rate=rate)
            if dry_run:
                return planned(plan, None, say)
            new = next_version(settings)
            return run_replay(
                spark, settings, plan, new, False, max_offsets, say=say, on_result=on_result
            )
        info = extendable(spark, settings, version)
        assert info.topic is not None
        plan = plan_extension(settings, info.topic, version, info.end_offsets, rate)
        if dry_run:
            return planned(plan, version, say)
        if not plan.records:
            say(f"==> {version}: the log has nothing new since its last run; nothing to do")
            result = {"version": version, "extended": True, "new_records": 0}
            return ReplayOutcome("nothing_new", version, result)
        return run_replay(
            spark,
            settings,
            plan,
            version,
            False,
            max_offsets,
            extension=info.extensions + 1,
            say=say,
            on_result=on_result,
        )


def extendable(spark: SparkSession, settings: Settings, version: str) -> VersionInfo:
    found = {v.version: v for v in list_versions(settings)}
    info = found.get(version)
    if info is None:
        raise ReplayRequestError(
            f"no version {version!r} to extend; versions: {', '.join(found) or 'none yet'}"
        )
    # "extending": an extension was interrupted, and running it again resumes it.
    if info.status not in ("caught_up", "extending"):
        raise ReplayRequestError(
            f"{version} cannot be extended: its status is {info.status} (only a version that "
            "caught up can; resume an interrupted replay with --version)"
        )
    return info


def planned(plan: ReplayPlan, version: str | None, say: Say) -> ReplayOutcome:
    say(plan.report())
    say("dry run: nothing written")
    return ReplayOutcome("planned", version, plan_summary(plan, version))


def version_to_write(spark: SparkSession, settings: Settings, asked: str | None) -> str:
    if asked is None:
        return next_version(settings)
    existing = {v.version: v for v in list_versions(settings)}
    if asked in existing and existing[asked].status in ("caught_up", "extending", "removed"):
        raise ReplayRequestError(
            f"version {asked} already exists ({existing[asked].status}): choose another name"
        )
    return asked  # new, or one that was interrupted: it resumes from its checkpoint


def run_replay(
    spark: SparkSession,
    settings: Settings,
    plan: ReplayPlan,
    version: str,
    live: bool = False,
    max_offsets_per_trigger: int | None = None,
    extension: int = 0,
    say: Say = print,
    on_result: Callable[[dict[str, Any]], None] | None = None,
) -> ReplayOutcome:
    """Replay `plan` into `version` (resuming it if it was interrupted). `extension` n > 0:
    the plan continues the caught-up `version`, for the n-th time."""
    outputs = SpeedOutputs.replay(version)
    if extension:
        record_version_event(spark, settings, version, "extending", plan, sequence=extension)
    else:
        record_version_event(spark, settings, version, "planned", plan)
    say(plan.report())
    say(f"==> replay {version}: writing {outputs.name}.*")
    began = time.monotonic()
    query = start_query(
        spark,
        settings,
        outputs,
        available_now=not live,
        topic=plan.topic,
        starting_offsets=plan.spark_starting_offsets(),
        max_offsets_per_trigger=max_offsets_per_trigger or settings.replay.max_offsets_per_trigger,
        # A promoted version is served at its pins, which the stream's vacuums must not delete
        # however long its extensions fail their gate.
        kept_versions=lambda: pinned_table_versions(settings, version),
    )
    stop = StopRequest(state_dir() / "run" / f"replay_{version}.stop")
    try:
        caught_up = follow(
            query, plan, version, settings.replay.progress_every_seconds, stop, live, say
        )
    except QueryFailedError as err:
        note = str(err)[:2000]
        record_version_event(spark, settings, version, "failed", plan, extension, note=note)
        return ReplayOutcome("failed", version, failure=str(err))
    seconds = time.monotonic() - began
    if not caught_up:
        say(f"==> replay {version} stopped before the end; run it again to resume")
        return ReplayOutcome("stopped", version)
    summary = replay_summary(spark, settings, outputs)
    reached = reached_offsets(query, plan.topic)
    # This run's records: a whole replay's, or what an extension added.
    new_records = records_done(plan, reached)
    record_version_event(
        spark,
        settings,
        version,
        "extended" if extension else "caught_up",
        plan,
        sequence=extension,
        records=summary["records"],
        seconds=seconds,
        rate=new_records / seconds if seconds > 0 else None,
        watermark_micros=summary["watermark_micros"],
        end_offsets={**plan.end_offsets, **reached},
    )
    done = "extended" if extension else "caught up"
    say(f"==> replay {version} {done}: {new_records} records in {seconds:.1f} s")
    # Serving reads the active version as its last gate saw it: what an extension of it
    # added is served only if it passes the same gate as a promotion.
    verdict = advance_extension(spark, settings, version, say) if extension else None
    active, served = verdict is not None, verdict is not None and verdict.passed
    unserved = None
    if active and not served:
        since = pinned_since(pointer_history(settings), version)
        unserved = unserved_note(version, since, datetime.now(UTC))
    if verdict is not None:
        say(
            served_line(version, settings.mode)
            if served
            else f"==> {version} is the active version, but its gate failed: "
            f"{verdict.message()}\n{unserved}\n(see the reconcile DAG's report; --force serves "
            "it)"
        )
    else:
        say(
            f"==> promote it with the promote_version DAG (or `python -m jobs.versions "
            f"promote {version}`)"
        )
    result = {
        "version": version,
        **summary,
        "seconds": seconds,
        "new_records": new_records,
        "extended": bool(extension),
        "active": active,
        "served": served,
        "unserved": unserved,
    }
    outcome = ReplayOutcome("caught_up", version, result)
    if on_result is not None:
        on_result(result)
    if live and not outcome.not_served:
        say(f"==> replay {version} keeps consuming the live log until stopped")
        run_until_stopped(query, stop, say=say)
    return outcome


def served_line(version: str, mode: str) -> str:
    """An extension of the active version passed its gate. Serving reads the active version
    only in kappa mode; in lambda mode it reads batch + speed (as jobs.versions says too)."""
    if mode == "kappa":
        return f"==> {version} is the active version: serving reads what this run added now"
    return (
        f"==> {version} is the active version: serving reads what this run added once the mode "
        "is kappa (TRIBUTARY__MODE=kappa); in lambda mode, as now, it reads batch + speed"
    )


def follow(
    query: StreamingQuery,
    plan: ReplayPlan,
    version: str,
    every: float,
    stop: StopRequest,
    live: bool,
    say: Say = print,
) -> bool:
    """Log progress until the query has read the planned end (True) or stops (False)."""
    total = max(plan.records, 1)
    began = time.monotonic()
    last_print, last_done, batch_began = 0.0, 0, began
    while True:
        await_end(query, 1)
        done = records_done(plan, reached_offsets(query, plan.topic))
        now = time.monotonic()
        if done != last_done:
            batch_began = now
        if now - last_print >= every or (done >= plan.records and done != last_done):
            # Records count as done when their micro-batch commits, so a large batch shows
            # no progress for a while: say that one is running, and for how long.
            running = query.isActive and query.status["isTriggerActive"] and done < plan.records
            say(
                f"replay {version}: {done}/{plan.records} records "
                f"({100 * done / total:.0f}%), {done / max(now - began, 1e-9):.0f} records/s"
                + (
                    f"; a micro-batch has been running for {now - batch_began:.0f} s"
                    if running
                    else ""
                )
            )
            last_print = now
        last_done = done
        if not query.isActive:
            failure = query.exception()
            if failure is not None:
                raise QueryFailedError(str(failure).strip().splitlines()[0][:2000])
            return done >= plan.records
        # A live replay has caught up once it read the planned end and is between batches;
        # an availableNow one ends by itself.
        if live and done >= plan.records and not query.status["isTriggerActive"]:
            return True
        if stop:
            query.stop()
            return False


def reached_offsets(query: StreamingQuery, topic: str) -> dict[int, int]:
    """Per partition, the offset after the last one the query's newest batch read."""
    progress = query.lastProgress
    if not progress or not progress.get("sources"):
        return {}
    end = progress["sources"][0].get("endOffset")
    if isinstance(end, str):
        # PySpark 4 hands the offsets over as the text of a Python dict, not as JSON.
        end = ast.literal_eval(end)
    return {int(p): int(o) for p, o in (end or {}).get(topic, {}).items()}


def replay_summary(
    spark: SparkSession, settings: Settings, outputs: SpeedOutputs
) -> dict[str, int | None]:
    from pyspark.sql import functions as F

    progress = spark.read.format("delta").load(outputs.progress.path(settings))
    row = progress.agg(
        F.sum("input_rows").alias("records"),
        F.max("watermark_micros").alias("watermark_micros"),
        F.sum("late_events").alias("late"),
        F.sum("quarantined").alias("quarantined"),
        F.sum("duplicates").alias("duplicates"),
    ).first()
    assert row is not None
    return {k: (int(v) if v is not None else None) for k, v in row.asDict().items()}


def plan_summary(plan: ReplayPlan, version: str | None) -> dict[str, Any]:
    return {
        "version": version,
        "topic": plan.topic,
        "start": plan.start.describe(),
        "records": plan.records,
        "start_offsets": plan.start_offsets,
        "end_offsets": plan.end_offsets,
        "gaps": plan.gaps,
        "estimated_seconds": round(plan.estimated_seconds(), 1),
    }
