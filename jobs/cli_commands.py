"""The `tributary` subcommands (jobs/cli.py parses their arguments): each calls the library,
prints its answer and returns its exit status."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime

from jobs.contract import Exit
from lakehouse.core.config import get_settings
from lakehouse.core.locks import exclusive_writer
from lakehouse.core.spark import get_spark_checked
from lakehouse.core.tables import RECONCILE
from lakehouse.reconcile.request import (
    LOCK_WAIT_SECONDS,
    BadComparison,
    ComparisonRequest,
    VersionRemoved,
    compare_and_gate,
    compare_and_record,
)
from lakehouse.serving.rows import rows_as_text
from lakehouse.serving.sql import (
    StatementRefused,
    check_starts_like_a_query,
    query_serving_views,
    statement_failed,
)

# Long sorted user lists make a table unreadable; they stay one flag away.
WIDE_COLUMNS = {"users"}


def query(args: argparse.Namespace) -> Exit:
    from lakehouse.serving.serve import NoServingDataError, row_order, serve

    if args.start and args.end and args.start >= args.end:
        print(
            f"tributary query: --from {args.start} is not before --to {args.end}", file=sys.stderr
        )
        return Exit.BAD_REQUEST
    settings = get_settings()
    spark = get_spark_checked("tributary-query", settings)
    try:
        served, coverage = serve(spark, settings, args.view, args.start, args.end)
    except NoServingDataError as err:
        print(f"tributary query: {err}", file=sys.stderr)
        return Exit.NOTHING_TO_DO
    if not args.with_users:
        served = served.drop(*(WIDE_COLUMNS & set(served.columns)))
    ordered = served.orderBy(*row_order(args.view))
    rows = rows_as_text(ordered, args.limit, args.format)
    print(rows.text, end="")
    print(f"-- {rows.note()}; {coverage.seam()}", file=sys.stderr)
    return Exit.OK


def sql(args: argparse.Namespace) -> Exit:
    """Spark SQL over the serving views, registered as `serving_<view>`. Read-only."""
    from pyspark.errors import PySparkException

    registered: list[str] = []
    try:
        check_starts_like_a_query(args.statement)  # before Spark starts
        settings = get_settings()
        spark = get_spark_checked("tributary-sql", settings)
        answer = query_serving_views(spark, settings, args.statement)
        registered = answer.registered
        for name in answer.missing:
            print(f"-- serving_{name}: no results yet", file=sys.stderr)
        rows = rows_as_text(answer.result, args.limit, args.format)
        print(rows.text, end="")
    except StatementRefused as err:
        print(f"tributary sql: {err}", file=sys.stderr)
        return Exit.BAD_REQUEST
    except PySparkException as err:  # found as it runs: 1/0, bad casts
        print(f"tributary sql: {statement_failed(err, registered)}", file=sys.stderr)
        return Exit.BAD_REQUEST
    print(f"-- {rows.note()}", file=sys.stderr)
    return Exit.OK


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
        spark = get_spark_checked("tributary-compare", settings)
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
        done = migrate_bronze(
            get_spark_checked("tributary-migrate", settings), settings, args.tables
        )
    except MigrationRefused as err:
        print(f"tributary migrate-bronze: {err}", file=sys.stderr)
        return Exit.BAD_REQUEST
    except MigrationError as err:
        print(f"tributary migrate-bronze: {err}", file=sys.stderr)
        return Exit.CHECKS_FAILED
    print(f"-- {sum(o.status == MIGRATED for o in done)} of {len(done)} tables rewritten")
    return Exit.OK
