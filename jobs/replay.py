"""Kappa replay: the speed layer's own code over the Kafka log, into a new version.

    python -m jobs.replay --dry-run                            # what a replay would read
    python -m jobs.replay                                      # from earliest into the next vN
    python -m jobs.replay --start timestamp --timestamp 2026-11-25T10:00Z --version v7
    python -m jobs.replay --start offsets --offsets '{"0": 120, "1": 0, "2": 42}'
    python -m jobs.replay --live                               # keep consuming after the end
    python -m jobs.replay --extend v7                          # v7 over the log written since
    python -m jobs.replay --scheduled                          # the kappa DAG's scheduled run

Writes `replay_<version>.*` (quarantine, silver, the views, late events, progress; no copy
of the log, which live bronze keeps) with its own checkpoint and writer id; the live stream
keeps running untouched. Killed, it resumes where it stopped when run again with the same
--version. Before starting, the retention guard refuses a start the log no longer holds
(--force replays what exists and records the gap). Promote the result with
`python -m jobs.versions promote <version>`.

--extend continues a caught-up version over the records the log gained since its last run,
into the same tables, from its own checkpoint: a replay of the recent log, not of all of it.
Windows its last run left open are completed with the state it kept; events older than its
watermark go to its late events. --scheduled is what the kappa_replay DAG's schedule runs in
kappa mode: extend the active version, or replay the whole log into the next version when
no version is active yet.

An extension of the active version is checked before serving reads it: it passes the same
reconciliation gate as a promotion, or serving keeps reading the version as it was.

Exit status: 0 done, 1 cannot run (Kafka, Spark, storage, another replay running), 2 bad
request (nothing written), 3 the replay failed (run it again to resume), 4 an extension of
the active version was written but failed its gate (serving does not read it).
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import json
import sys
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from jobs.arguments import OneLineParser, iso_moment
from jobs.speed_layer import QueryFailedError, StopRequest, start_query
from lakehouse.core.config import ConfigError, Settings, get_settings
from lakehouse.core.kafka_io import KafkaUnavailableError, check_broker
from lakehouse.core.kafka_offsets import UnknownTopicError
from lakehouse.core.locks import WriterBusyError, exclusive_writer
from lakehouse.core.paths import state_dir
from lakehouse.core.spark import SparkSetupError, get_spark
from lakehouse.core.storage import StorageError, ensure_bucket
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
from lakehouse.speed.micro_batch import SpeedOutputs

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import StreamingQuery

    from lakehouse.replay.versions import VersionInfo

EXIT_CANNOT_RUN, EXIT_BAD_REQUEST, EXIT_FAILED, EXIT_NOT_SERVED = 1, 2, 3, 4
RESULT_PREFIX = "replay result: "


def served_line(version: str, mode: str) -> str:
    """An extension of the active version passed its gate. Serving reads the active version
    only in kappa mode; in lambda mode it reads batch + speed (as jobs.versions says too)."""
    if mode == "kappa":
        return f"==> {version} is the active version: serving reads what this run added now"
    return (
        f"==> {version} is the active version: serving reads what this run added once the mode "
        "is kappa (TRIBUTARY__MODE=kappa); in lambda mode, as now, it reads batch + speed"
    )


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="python -m jobs.replay",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--start", help="earliest (the default) | timestamp | offsets")
    parser.add_argument("--timestamp", type=iso_moment, help="with --start timestamp (UTC)")
    parser.add_argument("--offsets", help='with --start offsets: {"<partition>": <offset>, ...}')
    parser.add_argument("--version", help="the new version's name (default: the next vN)")
    parser.add_argument("--topic", help="the log to replay (default: the configured topic)")
    parser.add_argument("--live", action="store_true", help="keep consuming after the end")
    parser.add_argument("--dry-run", action="store_true", help="plan and report; write nothing")
    parser.add_argument(
        "--force", action="store_true", help="replay what exists when retention deleted the start"
    )
    parser.add_argument("--max-offsets-per-trigger", type=int, help="records per micro-batch")
    parser.add_argument(
        "--extend",
        metavar="VERSION",
        help="continue VERSION over the log written since its last run",
    )
    parser.add_argument(
        "--scheduled",
        action="store_true",
        help="extend the active version (or, with none active, replay the whole log)",
    )
    return parser


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    now = datetime.now(UTC)
    try:
        if args.max_offsets_per_trigger is not None and args.max_offsets_per_trigger < 1:
            raise ReplayRequestError("--max-offsets-per-trigger must be at least 1")
        if args.extend or args.scheduled:
            _check_continuation(args)
            settings = get_settings()
            return continue_log(settings, args.extend, args.dry_run, args.max_offsets_per_trigger)
        start = ReplayStart.parse(args.start or "earliest", args.timestamp, args.offsets, now)
        if args.version:
            check_version_name(args.version)
        settings = get_settings()
        topic = args.topic or settings.kafka.topic
        plan = plan_replay(settings, topic, start, force=args.force, rate=measured_rate(settings))
        if args.dry_run:
            _dry_run(plan, args.version)
            return 0
        if settings.storage.on_s3:
            ensure_bucket(settings)
        with exclusive_writer(settings, REPLAY):
            spark = get_spark(REPLAY, settings)
            version = _version_to_write(spark, settings, args.version)
            return run_replay(
                spark, settings, plan, version, args.live, args.max_offsets_per_trigger
            )
    except (ReplayRequestError, UnknownTopicError) as err:
        print(f"replay: {err}; nothing written", file=sys.stderr)
        return EXIT_BAD_REQUEST
    except (
        ConfigError,
        KafkaUnavailableError,
        SparkSetupError,
        StorageError,
        WriterBusyError,
    ) as err:
        print(f"replay: {err}", file=sys.stderr)
        return EXIT_CANNOT_RUN


def _check_continuation(args: argparse.Namespace) -> None:
    """--extend and --scheduled start where a version ended: nothing else may say where."""
    given = {
        "--start": args.start,
        "--timestamp": args.timestamp,
        "--offsets": args.offsets,
        "--version": args.version,
        "--topic": args.topic,
        "--force": args.force,
        "--live": args.live,
        "--scheduled": args.scheduled and args.extend,
    }
    conflicting = [flag for flag, value in given.items() if value]
    if conflicting:
        which = "--extend" if args.extend else "--scheduled"
        raise ReplayRequestError(
            f"{which} continues from where a version ended; it takes no {', '.join(conflicting)}"
        )
    if args.extend:
        check_version_name(args.extend)


def continue_log(
    settings: Settings, extend: str | None, dry_run: bool, max_offsets: int | None = None
) -> int:
    """Extend `extend`; or, with None (the scheduled run), the active version, or the whole
    log into the next version when none is active yet."""
    from lakehouse.replay.versions import LIVE, active_version, next_version

    if settings.storage.on_s3:
        ensure_bucket(settings)
    check_broker(settings)  # the plan needs it, and comes after Spark has started
    rate = measured_rate(settings)
    with contextlib.ExitStack() as held:
        if not dry_run:
            held.enter_context(exclusive_writer(settings, REPLAY))
        spark = get_spark(REPLAY, settings)
        version = extend or active_version(spark, settings)
        if version == LIVE:
            print("no replay version is active yet: replaying the whole log into a new one")
            plan = plan_replay(settings, settings.kafka.topic, ReplayStart("earliest"), rate=rate)
            if dry_run:
                _dry_run(plan, None)
                return 0
            return run_replay(
                spark, settings, plan, next_version(spark, settings), False, max_offsets
            )
        info = extendable(spark, settings, version)
        assert info.topic is not None
        plan = plan_extension(settings, info.topic, version, info.end_offsets, rate)
        if dry_run:
            _dry_run(plan, version)
            return 0
        if not plan.records:
            print(f"==> {version}: the log has nothing new since its last run; nothing to do")
            print(
                RESULT_PREFIX
                + json.dumps({"version": version, "extended": True, "new_records": 0}),
                flush=True,
            )
            return 0
        return run_replay(
            spark, settings, plan, version, False, max_offsets, extension=info.extensions + 1
        )


def extendable(spark: SparkSession, settings: Settings, version: str) -> VersionInfo:
    from lakehouse.replay.versions import list_versions

    found = {v.version: v for v in list_versions(spark, settings)}
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


def _dry_run(plan: ReplayPlan, version: str | None) -> None:
    print(plan.report())
    print("dry run: nothing written", flush=True)
    print(RESULT_PREFIX + json.dumps(_plan_summary(plan, version)), flush=True)


def _version_to_write(spark: SparkSession, settings: Settings, asked: str | None) -> str:
    from lakehouse.replay.versions import list_versions, next_version

    if asked is None:
        return next_version(spark, settings)
    existing = {v.version: v for v in list_versions(spark, settings)}
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
) -> int:
    """Replay `plan` into `version` (resuming it if it was interrupted); an exit status.
    `extension` n > 0: the plan continues the caught-up `version`, for the n-th time."""
    from lakehouse.replay.versions import pinned_table_versions, record_version_event

    outputs = SpeedOutputs.replay(version)
    if extension:
        record_version_event(spark, settings, version, "extending", plan, sequence=extension)
    else:
        record_version_event(spark, settings, version, "planned", plan)
    print(plan.report(), flush=True)
    print(f"==> replay {version}: writing {outputs.name}.*", flush=True)
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
        kept_versions=lambda: pinned_table_versions(spark, settings, version),
    )
    stop = StopRequest(state_dir() / "run" / f"replay_{version}.stop")
    try:
        caught_up = follow(query, plan, version, settings.replay.progress_every_seconds, stop, live)
    except QueryFailedError as err:
        note = str(err)[:2000]
        record_version_event(spark, settings, version, "failed", plan, extension, note=note)
        print(f"replay {version} failed: {err}; run it again to resume", file=sys.stderr)
        return EXIT_FAILED
    seconds = time.monotonic() - began
    if not caught_up:
        print(f"==> replay {version} stopped before the end; run it again to resume")
        return 0
    summary = replay_summary(spark, settings, outputs)
    reached = _reached(query, plan.topic)
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
    print(f"==> replay {version} {done}: {new_records} records in {seconds:.1f} s", flush=True)
    # Serving reads the active version as its last gate saw it: what an extension of it
    # added is served only if it passes the same gate as a promotion.
    from jobs.versions import advance_extension

    verdict = advance_extension(spark, settings, version) if extension else None
    active, served = verdict is not None, verdict is not None and verdict.passed
    unserved = None
    if active and not served:
        from lakehouse.replay.versions import pinned_since, pointer_history, unserved_note

        since = pinned_since(pointer_history(spark, settings), version)
        unserved = unserved_note(version, since, datetime.now(UTC))
    if verdict is not None:
        print(
            served_line(version, settings.mode)
            if served
            else f"==> {version} is the active version, but its gate failed: "
            f"{verdict.message()}\n{unserved}\n(see the reconcile DAG's report; --force serves "
            "it)",
            flush=True,
        )
    else:
        print(f"==> promote it with `python -m jobs.versions promote {version}`", flush=True)
    result = {"version": version, **summary, "seconds": seconds, "new_records": new_records}
    print(
        RESULT_PREFIX
        + json.dumps(
            {
                **result,
                "extended": bool(extension),
                "active": active,
                "served": served,
                "unserved": unserved,
            }
        )
    )
    if active and not served:
        return EXIT_NOT_SERVED
    if live:
        print(f"==> replay {version} keeps consuming the live log until stopped", flush=True)
        from jobs.speed_layer import run_until_stopped

        run_until_stopped(query, stop)
    return 0


def follow(
    query: StreamingQuery,
    plan: ReplayPlan,
    version: str,
    every: float,
    stop: StopRequest,
    live: bool,
) -> bool:
    """Log progress until the query has read the planned end (True) or stops (False)."""
    total = max(plan.records, 1)
    began = time.monotonic()
    last_print, last_done, batch_began = 0.0, 0, began
    while True:
        query.awaitTermination(1)
        done = records_done(plan, _reached(query, plan.topic))
        now = time.monotonic()
        if done != last_done:
            batch_began = now
        if now - last_print >= every or (done >= plan.records and done != last_done):
            # Records count as done when their micro-batch commits, so a large batch shows
            # no progress for a while: say that one is running, and for how long.
            running = query.isActive and query.status["isTriggerActive"] and done < plan.records
            print(
                f"replay {version}: {done}/{plan.records} records "
                f"({100 * done / total:.0f}%), {done / max(now - began, 1e-9):.0f} records/s"
                + (
                    f"; a micro-batch has been running for {now - batch_began:.0f} s"
                    if running
                    else ""
                ),
                flush=True,
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


def _reached(query: StreamingQuery, topic: str) -> dict[int, int]:
    progress = query.lastProgress
    if not progress or not progress.get("sources"):
        return {}
    end = progress["sources"][0].get("endOffset")
    if isinstance(end, str):
        # PySpark 4 hands the offsets over as the text of a Python dict, not as JSON.
        end = ast.literal_eval(end)
    return {int(p): int(o) for p, o in (end or {}).get(topic, {}).items()}


def replay_summary(spark: SparkSession, settings: Settings, outputs: SpeedOutputs) -> dict:
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


def _plan_summary(plan: ReplayPlan, version: str | None) -> dict:
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


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
