"""Argument types the jobs' command lines share."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from datetime import datetime
from typing import Any, NoReturn

from lakehouse.times import TimeRangeError, parse_iso


class OneLineParser(argparse.ArgumentParser):
    """argparse that reports a bad argument in one line, not a usage block."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


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
