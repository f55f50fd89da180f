"""`tributary`: ask the lakehouse questions from a terminal, without writing Spark code.

    python -m jobs.cli query event_counts_1m --from 2026-11-25T10:00Z --to 2026-11-25T12:00Z

(`make query ARGS="event_counts_1m --from ... --to ..."` runs the same.) Answers come from
the serving layer: batch results where the batch layer has run, speed results after that.
"""

from __future__ import annotations

import argparse
import sys
from datetime import datetime
from typing import TYPE_CHECKING, cast

from lakehouse.config import ConfigError, get_settings
from lakehouse.spark import SparkSetupError, get_spark
from lakehouse.times import as_utc
from lakehouse.views import VIEWS

if TYPE_CHECKING:
    import pandas as pd

# Long sorted user lists make a table unreadable; they stay one flag away.
WIDE_COLUMNS = {"users"}


def moment(text: str) -> datetime:
    try:
        return as_utc(datetime.fromisoformat(text.replace("Z", "+00:00")))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an ISO-8601 time (e.g. 2026-11-25T10:00Z)"
        ) from None


def query(args: argparse.Namespace) -> int:
    from lakehouse.serving import NoServingDataError, serve

    if args.start and args.end and args.start >= args.end:
        print(
            f"tributary query: --from {args.start} is not before --to {args.end}", file=sys.stderr
        )
        return 2
    settings = get_settings()
    spark = get_spark("tributary-query", settings)
    try:
        served, coverage = serve(spark, settings, args.view, args.start, args.end)
    except NoServingDataError as err:
        print(f"tributary query: {err}", file=sys.stderr)
        return 1
    v = VIEWS[args.view]
    if not args.with_users:
        served = served.drop(*(WIDE_COLUMNS & set(served.columns)))
    ordered = served.orderBy(v.time_column, *v.keys).limit(args.limit + 1)
    rows = cast("pd.DataFrame", ordered.toPandas())
    shown = rows.head(args.limit)
    if args.format == "csv":
        print(shown.to_csv(index=False), end="")
    else:
        print(shown.to_string(index=False) if len(shown) else "(no rows)")
    more = " (more rows: raise --limit)" if len(rows) > args.limit else ""
    seam = coverage.high_water
    print(
        f"-- {len(shown)} rows{more}; "
        + (
            f"batch results up to {seam:%Y-%m-%d %H:%M:%S}Z (batch version "
            f"{coverage.table_version}), speed results after"
            if seam
            else "no batch run yet: all speed results"
        ),
        file=sys.stderr,
    )
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tributary", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    q = commands.add_parser("query", help="rows of a serving view for a time range")
    q.add_argument("view", choices=list(VIEWS), help="the view")
    q.add_argument("--from", dest="start", type=moment, help="first instant (inclusive, UTC)")
    q.add_argument("--to", dest="end", type=moment, help="last instant (exclusive, UTC)")
    q.add_argument("--limit", type=int, default=200, help="at most this many rows (200)")
    q.add_argument("--format", choices=["table", "csv"], default="table")
    q.add_argument("--with-users", action="store_true", help="show active_users_10m's user lists")
    q.set_defaults(run=query)
    return parser


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.run(args))
    except (ConfigError, SparkSetupError) as err:
        print(f"tributary: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
