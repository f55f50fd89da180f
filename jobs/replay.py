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

Exit status (jobs.contract): 0 done, 1 cannot run (Kafka, Spark, storage, another replay
running), 2 bad request (nothing written), 4 an extension of the active version was written
but failed its gate (serving does not read it), 5 the replay failed (run it again to resume).
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime

from jobs.arguments import iso_moment, say
from jobs.contract import Exit, exit_with, result_line
from jobs.parser import OneLineParser
from lakehouse.core.config import ConfigError, get_settings
from lakehouse.core.kafka_io import KafkaUnavailableError
from lakehouse.core.kafka_offsets import UnknownTopicError
from lakehouse.core.locks import WriterBusyError
from lakehouse.core.spark import SparkSetupError
from lakehouse.core.storage import StorageError
from lakehouse.replay.plan import ReplayRequestError, ReplayStart, check_continuation
from lakehouse.replay.run import ReplayRequest, replay

JOB = "replay"


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


def checked_request(args: argparse.Namespace, now: datetime) -> ReplayRequest:
    """The replay the arguments ask for; ReplayRequestError if they conflict."""
    if args.extend or args.scheduled:
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
        check_continuation(args.extend, given)
        start = ReplayStart("earliest")
    else:
        start = ReplayStart.parse(args.start or "earliest", args.timestamp, args.offsets, now)
    return ReplayRequest(
        start=start,
        version=args.version,
        topic=args.topic,
        live=args.live,
        dry_run=args.dry_run,
        force=args.force,
        max_offsets_per_trigger=args.max_offsets_per_trigger,
        extend=args.extend,
        scheduled=args.scheduled,
    )


def main(argv: list[str]) -> Exit:
    args = build_parser().parse_args(argv)
    try:
        request = checked_request(args, datetime.now(UTC))
        outcome = replay(get_settings(), request, say, on_result=lambda r: say(result_line(JOB, r)))
    except (ReplayRequestError, UnknownTopicError) as err:
        print(f"replay: {err}; nothing written", file=sys.stderr)
        return Exit.BAD_REQUEST
    except (
        ConfigError,
        KafkaUnavailableError,
        SparkSetupError,
        StorageError,
        WriterBusyError,
    ) as err:
        print(f"replay: {err}", file=sys.stderr)
        return Exit.CANNOT_RUN
    if outcome.status == "failed":
        print(
            f"replay {outcome.version} failed: {outcome.failure}; run it again to resume",
            file=sys.stderr,
        )
        return Exit.FAILED
    return Exit.CHECKS_FAILED if outcome.not_served else Exit.OK


if __name__ == "__main__":
    exit_with(main(sys.argv[1:]))
