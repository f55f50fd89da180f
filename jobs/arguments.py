"""Argument types the jobs' command lines share."""

from __future__ import annotations

import argparse
import difflib
import math
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any, NoReturn

from lakehouse.core.times import TimeRangeError, parse_iso
from lakehouse.transforms.views import VIEWS


class OneLineParser(argparse.ArgumentParser):
    """argparse that reports a bad argument in one line, not a usage block, and takes options
    only as spelt: abbreviations are off, and a misspelt option is named, with the close ones.
    A subcommand's parser is one too (add_parser makes it of this class)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # With abbreviations, a misspelt option can silently be another one (--form: --format).
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        """Unknown options are an error here too: a subcommand's parser is called through this,
        and its unknown options must be named by it, with its own options as suggestions."""
        args = sys.argv[1:] if args is None else list(args)
        # argparse reports a missing required option before an unknown one: `--strat X` said
        # "--start is required". So a first, lenient pass finds the unknown ones.
        with _lenient(self):
            _, extras = super().parse_known_args(args, None)
        unknown = [arg for arg in extras if _is_option(arg)]
        if unknown:
            self.error(self._unrecognized(unknown))
        return super().parse_known_args(args, namespace)

    def _unrecognized(self, unknown: list[str]) -> str:
        known = [option for action in self._actions for option in action.option_strings]
        described = []
        for arg in unknown:
            name = arg.split("=", 1)[0]
            close = difflib.get_close_matches(name, known, n=2, cutoff=0.7)
            described.append(f"{name}: did you mean {' or '.join(close)}?" if close else name)
        noun = "argument" if len(unknown) == 1 else "arguments"
        return f"unrecognized {noun} {'; '.join(described)}"


@contextmanager
def _lenient(parser: argparse.ArgumentParser) -> Iterator[None]:
    """Within this block `parser` requires none of its arguments (a subcommand included) and
    takes any value: a misspelt option is named before a missing or bad value it explains."""
    saved = [(action, action.required, action.type, action.choices) for action in parser._actions]
    groups = [(group, group.required) for group in parser._mutually_exclusive_groups]
    for action, *_ in saved:
        action.required = False
        # A subcommand's choices are its parsers: those stay.
        if not isinstance(action, argparse._SubParsersAction):
            action.type, action.choices = None, None
    for group, _ in groups:
        group.required = False
    try:
        yield
    finally:
        for action, required, type_, choices in saved:
            action.required, action.type, action.choices = required, type_, choices
        for group, required in groups:
            group.required = required


def _is_option(arg: str) -> bool:
    """An argument argparse takes for an option: a negative number is a value."""
    if len(arg) < 2 or not arg.startswith("-"):
        return False
    try:
        float(arg)
    except ValueError:
        return True
    return False


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
