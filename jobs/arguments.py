"""Argument types the jobs' command lines share."""

from __future__ import annotations

import argparse
from datetime import datetime
from typing import NoReturn

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
