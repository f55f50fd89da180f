"""`tributary compare --cdc` (jobs/cli.py parses its arguments): the captured tables' current
rows and history recomputed from bronze against the changelog stream's, as
`python -m jobs.cdc_reconcile` compares them; recorded only with --record."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime

from jobs.arguments import window_options
from jobs.contract import Exit
from lakehouse.cdc.reconcile import NothingToReconcile, check_started
from lakehouse.core.config import get_settings
from lakehouse.core.spark import get_spark_checked
from lakehouse.reconcile.changelog_request import (
    BadChangelogRequest,
    checked_run_id,
    checked_tables,
    compare_changelog,
)


def compare_captured(args: argparse.Namespace) -> Exit:
    """The CDC reconciliation's summary, per table and kind; the dq rows only with --record.
    Exit status as `python -m jobs.cdc_reconcile` (0 equal, 2 bad arguments, 3 no changelog
    batch yet, 4 a table differs)."""
    try:
        if misplaced := window_options(args):
            raise BadChangelogRequest(
                f"{', '.join(misplaced)} with --cdc: it compares every captured table (or "
                "--table) as of the changelog stream's last batch"
            )
        if args.run_id and not args.record:
            raise BadChangelogRequest("--run-id names a recorded run: give --record too")
        settings = get_settings()
        tables = checked_tables(settings, args.tables)
        now = datetime.now(UTC)
        run_id = checked_run_id(args.run_id, f"cli:{now:%Y%m%dT%H%M%S}")
        check_started(settings)
        spark = get_spark_checked("tributary-compare", settings)
        compared = compare_changelog(spark, settings, run_id, now, tables, record=args.record)
    except BadChangelogRequest as err:
        print(f"tributary compare: {err}; nothing written", file=sys.stderr)
        return Exit.BAD_REQUEST
    except NothingToReconcile as err:
        print(f"tributary compare: {err}: nothing to compare", file=sys.stderr)
        return Exit.NOTHING_TO_DO
    print(compared.summary())
    return Exit.OK if compared.passed else Exit.CHECKS_FAILED
