"""Argument types and argument groups the jobs' command lines share."""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from lakehouse.core.times import TimeRangeError, parse_iso
from lakehouse.transforms.views import VIEWS

DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def iso_moment(text: str) -> datetime:
    """An ISO-8601 time ("Z" or an offset; none means UTC), as an aware UTC datetime."""
    try:
        return parse_iso(text)
    except TimeRangeError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an ISO-8601 time (e.g. 2026-11-25T10:00Z)"
        ) from None


def start_time(text: str) -> datetime:
    """'now' or an ISO-8601 time (none means UTC)."""
    return datetime.now(UTC) if text == "now" else iso_moment(text)


def duration(text: str) -> timedelta:
    """'90s', '15m', '3h', '1d' or plain seconds."""
    number, unit = (text[:-1], text[-1]) if text[-1:] in DURATION_UNITS else (text, "s")
    try:
        seconds = float(number) * DURATION_UNITS[unit]
    except ValueError:
        seconds = math.nan
    if not math.isfinite(seconds):
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration like 15m or 3h")
    try:
        return timedelta(seconds=seconds)
    except OverflowError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is too long a duration (at most {timedelta.max.days} days)"
        ) from None


def topic_name(text: str) -> str:
    # Kafka refuses "." and ".." although they match its character rule.
    if text in (".", "..") or not re.fullmatch(r"[A-Za-z0-9._-]{1,249}", text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a valid Kafka topic name")
    return text


def _number(
    parse: Callable[[str], float], noun: str, accept: Callable[[float], bool], rule: str
) -> Callable[[str], Any]:
    """An argparse type: `parse` the text, then refuse values `accept` rejects, saying `rule`."""

    def check(text: str) -> Any:
        try:
            value = parse(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {noun}") from None
        # float() takes "inf" and "nan": an infinite rate would send everything at once.
        if isinstance(value, float) and not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
        if not accept(value):
            raise argparse.ArgumentTypeError(f"must be {rule}, got {text}")
        return value

    return check


fraction = _number(float, "a number", lambda v: 0.0 <= v <= 1.0, "a fraction in [0, 1]")
positive_int = _number(int, "a whole number", lambda v: v >= 1, "at least 1")
positive_float = _number(float, "a number", lambda v: v > 0, "greater than 0")


def say(line: str) -> None:
    """A job's own line on standard output, flushed: a DAG task's log shows it at once."""
    print(line, flush=True)


def source_name(text: str) -> str:
    """A reconciliation side: batch, speed or replay:<version>."""
    from lakehouse.reconcile.sources import UnknownSourceError, named_source

    try:
        named_source(text)
    except UnknownSourceError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return text


def add_migration_arguments(parser: argparse.ArgumentParser) -> None:
    """Which bronze tables to migrate: shared by this job and `tributary migrate-bronze`."""
    parser.add_argument(
        "--table",
        dest="tables",
        nargs="+",
        default=[],
        metavar="NAME",
        help="only these: bronze.events_raw, bronze.quarantine, replay_<version>.quarantine",
    )


def add_comparison_arguments(parser: argparse.ArgumentParser) -> None:
    """What to compare: shared by this job and `tributary compare`."""
    sides = "batch, speed (the live speed layer) or replay:<version>"
    parser.add_argument(
        "--left", type=source_name, default="batch", help=f"left side: {sides} (batch)"
    )
    parser.add_argument(
        "--right", type=source_name, default="speed", help=f"right side: {sides} (speed)"
    )
    parser.add_argument(
        "--view",
        dest="views",
        action="append",
        choices=list(VIEWS),
        help="a view to compare (repeatable; default: every view)",
    )
    parser.add_argument("--from", dest="start", type=iso_moment, help="first instant (UTC)")
    parser.add_argument("--to", dest="end", type=iso_moment, help="end instant, exclusive (UTC)")
    parser.add_argument(
        "--batch-run",
        dest="batch_runs",
        action="append",
        default=[],
        help="compare the interval(s) this batch run recomputed (repeatable; Airflow passes "
        "the runs whose assets triggered it)",
    )


def window_options(args: argparse.Namespace) -> list[str]:
    """The options of a comparison of views given beside --cdc, which compares whole tables."""
    given = {
        "--left": args.left != "batch",
        "--right": args.right != "speed",
        "--view": bool(args.views),
        "--from": args.start is not None,
        "--to": args.end is not None,
        "--batch-run": bool(args.batch_runs),
    }
    return [option for option, set_ in given.items() if set_]
