"""`tributary compare --joins` (jobs/cli.py parses its arguments): every join's outputs
recomputed from their inputs against the streams', as `python -m jobs.joins_reconcile`
compares them; recorded only with --record."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime

from jobs.arguments import window_options
from jobs.contract import Exit
from lakehouse.core.config import get_settings
from lakehouse.core.spark import get_spark_checked


def compare_joins_outputs(args: argparse.Namespace) -> Exit:
    """The joins' summary, per output; the dq rows only with --record. Exit status as
    `python -m jobs.joins_reconcile` (0 equal, 2 bad arguments, 3 no join has a batch yet,
    4 an output differs)."""
    from lakehouse.reconcile.joins import NoJoinToJudge, check_started, compare_joins, summary_text

    misplaced = window_options(args) + (["--table"] if args.tables else [])
    if args.cdc:
        misplaced.append("--cdc")
    if args.run_id and not args.record:
        misplaced.append("--run-id without --record")
    if misplaced:
        print(
            f"tributary compare: {', '.join(misplaced)} with --joins: it compares every "
            "join's outputs as of each stream's last batch; nothing written",
            file=sys.stderr,
        )
        return Exit.BAD_REQUEST
    if args.run_id is not None and not args.run_id.strip():
        print("tributary compare: --run-id is empty; nothing written", file=sys.stderr)
        return Exit.BAD_REQUEST
    settings = get_settings()
    now = datetime.now(UTC)
    run_id = args.run_id or f"cli:{now:%Y%m%dT%H%M%S}"
    try:
        check_started(settings)
        spark = get_spark_checked("tributary-compare", settings)
        rec = compare_joins(spark, settings, run_id, now, record=args.record)
    except NoJoinToJudge as err:
        print(f"tributary compare: {err}: nothing to compare", file=sys.stderr)
        return Exit.NOTHING_TO_DO
    except LookupError as err:  # a stream moved on too far to find its last batch's versions
        print(f"tributary compare: {err}", file=sys.stderr)
        return Exit.CANNOT_RUN
    print(summary_text(rec, run_id))
    return Exit.OK if rec.passed else Exit.CHECKS_FAILED
