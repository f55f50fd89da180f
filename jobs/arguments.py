"""Argument types the jobs' command lines share."""

from __future__ import annotations

import argparse
from datetime import datetime

from lakehouse.times import parse_iso


def iso_moment(text: str) -> datetime:
    """An ISO-8601 time ("Z" or an offset; none means UTC), as an aware UTC datetime."""
    try:
        return parse_iso(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an ISO-8601 time (e.g. 2026-11-25T10:00Z)"
        ) from None
