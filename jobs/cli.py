"""`tributary`: ask the lakehouse questions from a terminal, without writing Spark code.

    tributary query event_counts_1m --from 2026-11-25T10:00Z --to 2026-11-25T12:00Z
    tributary sql "SELECT event_type, sum(events) FROM serving_event_counts_1m GROUP BY 1"
    tributary compare --left batch --right speed [--view ...] [--from ...] [--record]
    tributary compare --cdc [--table users ...] [--record]   (the captured tables)
    tributary compare --joins [--record]           (every join's outputs vs their recompute)
    tributary migrate-bronze [--table NAME ...]    (jobs/migrate_bronze.py)

`make setup` installs the `tributary` command in the venv (`.venv/bin/tributary`, or plain
`tributary` once the venv is activated); `python -m jobs.cli ...` and
`make query ARGS="event_counts_1m --from ... --to ..."` run the same. Answers come from the
serving layer: batch results where the batch layer has run, speed results after that."""

from __future__ import annotations

import argparse
import sys

from jobs.arguments import (
    add_comparison_arguments,
    add_migration_arguments,
    iso_moment,
    positive_int,
)
from jobs.cli_cdc import compare_captured
from jobs.cli_commands import compare, migrate, query, sql
from jobs.cli_joins import compare_joins_outputs
from jobs.contract import Exit, exit_with
from jobs.parser import OneLineParser
from lakehouse.core.config import ConfigError
from lakehouse.core.locks import WriterBusyError
from lakehouse.core.spark import SparkSetupError
from lakehouse.core.storage import StorageError
from lakehouse.serving.serve import SERVED_VIEWS


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="tributary", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    q = commands.add_parser("query", help="rows of a serving view for a time range")
    q.add_argument("view", choices=list(SERVED_VIEWS), help="the view")
    q.add_argument("--from", dest="start", type=iso_moment, help="first instant (inclusive, UTC)")
    q.add_argument("--to", dest="end", type=iso_moment, help="last instant (exclusive, UTC)")
    q.add_argument("--limit", type=positive_int, default=200, help="at most this many rows (200)")
    q.add_argument("--format", choices=["table", "csv"], default="table")
    q.add_argument("--with-users", action="store_true", help="show active_users_10m's user lists")
    q.set_defaults(run=query)
    s = commands.add_parser(
        "sql", help="Spark SQL over the serving views: serving_<view>, e.g. serving_user_sessions"
    )
    s.add_argument("statement", help='e.g. "SELECT * FROM serving_user_sessions LIMIT 10"')
    s.add_argument("--limit", type=positive_int, default=200, help="at most this many rows (200)")
    s.add_argument("--format", choices=["table", "csv"], default="table")
    s.set_defaults(run=sql)
    c = commands.add_parser(
        "compare", help="reconcile two sources (batch, speed) window by window: the summary"
    )
    add_comparison_arguments(c)
    c.add_argument(
        "--record", action="store_true", help="also record the run in dq.* (as the job does)"
    )
    c.add_argument("--run-id", help="with --record: the run's identity in dq.*")
    c.add_argument(
        "--cdc",
        action="store_true",
        help="compare the captured tables instead: each one's current rows and history "
        "recomputed from bronze vs the changelog stream's, as of its last batch",
    )
    c.add_argument(
        "--joins",
        action="store_true",
        help="compare the joins instead: each output recomputed from its inputs vs the "
        "join's stream, as of its last batch",
    )
    c.add_argument(
        "--table",
        dest="tables",
        action="append",
        default=[],
        metavar="NAME",
        help="with --cdc: a captured table to compare (repeatable; default: every one)",
    )
    c.set_defaults(run=compare_views_or_tables)
    m = commands.add_parser(
        "migrate-bronze",
        help="rewrite bronze tables holding key/value as strings to hold bytes, checked",
    )
    add_migration_arguments(m)
    m.set_defaults(run=migrate)
    return parser


def compare_views_or_tables(args: argparse.Namespace) -> Exit:
    """`compare`: the views, window by window; with --cdc, the captured tables; with
    --joins, the joins' outputs."""
    if args.joins:
        return compare_joins_outputs(args)
    if args.cdc:
        return compare_captured(args)
    if args.tables:
        print("tributary compare: --table goes with --cdc; nothing written", file=sys.stderr)
        return Exit.BAD_REQUEST
    return compare(args)


def main(argv: list[str]) -> Exit:
    args = build_parser().parse_args(argv)
    try:
        done: Exit = args.run(args)
    except (ConfigError, SparkSetupError, StorageError, WriterBusyError) as err:
        print(f"tributary: {err}", file=sys.stderr)
        return Exit.CANNOT_RUN
    return done


if __name__ == "__main__":
    exit_with(main(sys.argv[1:]))
