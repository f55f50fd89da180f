"""`tributary`: ask the lakehouse questions from a terminal, without writing Spark code.

    tributary query event_counts_1m --from 2026-11-25T10:00Z --to 2026-11-25T12:00Z
    tributary sql "SELECT event_type, sum(events) FROM serving_event_counts_1m GROUP BY 1"
    tributary compare --left batch --right speed [--view ...] [--from ...] [--record]
    tributary migrate-bronze [--table NAME ...]    (jobs/migrate_bronze.py)

`make setup` installs the `tributary` command in the venv (`.venv/bin/tributary`, or plain
`tributary` once the venv is activated); `python -m jobs.cli ...` and
`make query ARGS="event_counts_1m --from ... --to ..."` run the same. Answers come from the
serving layer: batch results where the batch layer has run, speed results after that."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from typing import TYPE_CHECKING, cast

from jobs.arguments import (
    OneLineParser,
    add_comparison_arguments,
    add_migration_arguments,
    iso_moment,
    positive_int,
)
from jobs.contract import Exit, exit_with
from lakehouse.core.config import ConfigError, Settings, get_settings
from lakehouse.core.locks import WriterBusyError, exclusive_writer
from lakehouse.core.spark import SparkSetupError, get_spark
from lakehouse.core.storage import StorageError, check_bucket
from lakehouse.core.tables import RECONCILE
from lakehouse.reconcile.request import (
    LOCK_WAIT_SECONDS,
    BadComparison,
    ComparisonRequest,
    VersionRemoved,
    compare_and_gate,
    compare_and_record,
)
from lakehouse.serving.sql import (
    StatementRefused,
    check_starts_like_a_query,
    query_serving_views,
    statement_failed,
)
from lakehouse.transforms.views import VIEWS

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import DataFrame, SparkSession

# Long sorted user lists make a table unreadable; they stay one flag away.
WIDE_COLUMNS = {"users"}


def start_spark(name: str, settings: Settings) -> SparkSession:
    """The session, once storage answers: with MinIO down, Spark's S3A retries for minutes
    without a word before it fails."""
    if settings.storage.on_s3:
        check_bucket(settings)
    return get_spark(name, settings)


def query(args: argparse.Namespace) -> Exit:
    from lakehouse.serving.serve import NoServingDataError, serve

    if args.start and args.end and args.start >= args.end:
        print(
            f"tributary query: --from {args.start} is not before --to {args.end}", file=sys.stderr
        )
        return Exit.BAD_REQUEST
    settings = get_settings()
    spark = start_spark("tributary-query", settings)
    try:
        served, coverage = serve(spark, settings, args.view, args.start, args.end)
    except NoServingDataError as err:
        print(f"tributary query: {err}", file=sys.stderr)
        return Exit.NOTHING_TO_DO
    v = VIEWS[args.view]
    if not args.with_users:
        served = served.drop(*(WIDE_COLUMNS & set(served.columns)))
    ordered = served.orderBy(v.time_column, *v.keys)
    shown, more = print_rows(ordered, args.limit, args.format)
    seam = coverage.high_water
    print(
        f"-- {shown} rows{more}; "
        + (
            f"batch results up to {seam:%Y-%m-%d %H:%M:%S}Z (batch version "
            f"{coverage.table_version}), speed results after"
            if seam
            else "no batch run yet: all speed results"
        ),
        file=sys.stderr,
    )
    return Exit.OK


def sql(args: argparse.Namespace) -> Exit:
    """Spark SQL over the serving views, registered as `serving_<view>`. Read-only."""
    from pyspark.errors import PySparkException

    registered: list[str] = []
    try:
        check_starts_like_a_query(args.statement)  # before Spark starts
        settings = get_settings()
        spark = start_spark("tributary-sql", settings)
        answer = query_serving_views(spark, settings, args.statement)
        registered = answer.registered
        for name in answer.missing:
            print(f"-- serving_{name}: no results yet (run the speed layer)", file=sys.stderr)
        shown, more = print_rows(answer.result, args.limit, args.format)
    except StatementRefused as err:
        print(f"tributary sql: {err}", file=sys.stderr)
        return Exit.BAD_REQUEST
    except PySparkException as err:  # found as it runs: 1/0, bad casts
        print(f"tributary sql: {statement_failed(err, registered)}", file=sys.stderr)
        return Exit.BAD_REQUEST
    print(f"-- {shown} rows{more}", file=sys.stderr)
    return Exit.OK


def print_rows(df: DataFrame, limit: int, form: str) -> tuple[int, str]:
    """Print at most `limit` rows as a table or CSV; (rows printed, a note if there were more)."""
    rows = cast("pd.DataFrame", df.limit(limit + 1).toPandas())
    shown = rows.head(limit)
    if form == "csv":
        print(shown.to_csv(index=False), end="")
    else:
        print(shown.to_string(index=False) if len(shown) else "(no rows)")
    return len(shown), " (more rows: raise --limit)" if len(rows) > limit else ""


def compare(args: argparse.Namespace) -> Exit:
    """The reconciliation's summary in the terminal and its HTML report; the dq tables only
    with --record.
    Exit status as `python -m jobs.reconcile` (0 passed, 2 bad arguments, 3 nothing to
    compare, 4 gate failed)."""
    try:
        request = ComparisonRequest.checked(
            args.left, args.right, args.views, args.start, args.end, args.batch_runs
        )
        if args.run_id and not args.record:
            raise BadComparison("--run-id names a recorded run: give --record too")
        settings = get_settings()
        spark = start_spark("tributary-compare", settings)
        now = datetime.now(UTC)
        run_id = args.run_id or f"cli:{request.left}-{request.right}:{now:%Y%m%dT%H%M%S}"
        if args.record:
            with exclusive_writer(settings, RECONCILE, wait_seconds=LOCK_WAIT_SECONDS):
                compared = compare_and_record(spark, settings, request, run_id)
        else:
            compared = compare_and_gate(spark, settings, request, run_id)
    except BadComparison as err:
        print(f"tributary compare: {err}; nothing written", file=sys.stderr)
        return Exit.BAD_REQUEST
    except VersionRemoved as err:
        print(f"tributary compare: {err}: nothing to compare", file=sys.stderr)
        return Exit.NOTHING_TO_DO
    print(compared.summary)
    if compared.report is not None:
        print(f"report: {compared.report}")
    if not compared.compared:
        return Exit.NOTHING_TO_DO
    return Exit.OK if compared.verdict.passed else Exit.CHECKS_FAILED


def migrate(args: argparse.Namespace) -> Exit:
    """`python -m jobs.migrate_bronze`'s work and exit status (lakehouse/ops/migrate.py)."""
    from lakehouse.ops.migrate import (
        MIGRATED,
        MigrationError,
        MigrationRefused,
        migrate_bronze,
        tables_named,
    )

    try:
        tables_named(args.tables)  # before Spark starts
        settings = get_settings()
        done = migrate_bronze(start_spark("tributary-migrate", settings), settings, args.tables)
    except MigrationRefused as err:
        print(f"tributary migrate-bronze: {err}", file=sys.stderr)
        return Exit.BAD_REQUEST
    except MigrationError as err:
        print(f"tributary migrate-bronze: {err}", file=sys.stderr)
        return Exit.CHECKS_FAILED
    print(f"-- {sum(o.status == MIGRATED for o in done)} of {len(done)} tables rewritten")
    return Exit.OK


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="tributary", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    q = commands.add_parser("query", help="rows of a serving view for a time range")
    q.add_argument("view", choices=list(VIEWS), help="the view")
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
    c.set_defaults(run=compare)
    m = commands.add_parser(
        "migrate-bronze",
        help="rewrite bronze tables holding key/value as strings to hold bytes, checked",
    )
    add_migration_arguments(m)
    m.set_defaults(run=migrate)
    return parser


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
