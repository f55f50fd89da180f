"""The batch jobs' shared request: a closed interval of whole minutes, and the run's id."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from datetime import UTC, datetime

from jobs.arguments import iso_moment
from jobs.parser import OneLineParser
from lakehouse.batch.recompute import Interval, IntervalError

# Another batch run (a backfill beside the schedule) finishes in minutes: a batch job waits
# for the batch writer's lock this long rather than fail.
LOCK_WAIT_SECONDS = 900


@dataclass(frozen=True)
class BatchRequest:
    interval: Interval
    run_id: str


def interval_parser(prog: str, description: str | None) -> OneLineParser:
    """A parser of --start, --end and --run-id; a job adds its own options."""
    parser = OneLineParser(
        prog=prog, description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--start", type=iso_moment, required=True, help="interval start (inclusive)"
    )
    parser.add_argument("--end", type=iso_moment, required=True, help="interval end (exclusive)")
    parser.add_argument(
        "--run-id", help="the run's identity in ops.batch_runs (Airflow passes its run id)"
    )
    return parser


def checked_request(args: argparse.Namespace, label: str) -> BatchRequest | None:
    """The interval and run id asked for; None once `label: <why>` says the interval is
    refused (nothing is written)."""
    now = datetime.now(UTC)
    try:
        interval = Interval.checked(args.start, args.end, now)
    except IntervalError as err:
        print(f"{label}: {err}; nothing written", file=sys.stderr)
        return None
    return BatchRequest(interval, args.run_id or f"manual:{interval}:{now:%Y%m%dT%H%M%S}")
