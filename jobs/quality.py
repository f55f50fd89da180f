"""Validate the lakehouse's tables with their Great Expectations suites (lakehouse.quality).

    python -m jobs.quality [--layer bronze|silver|quarantine|speed|batch|all] [--table NAME ...]
                           [--from 2026-11-25T10:00Z] [--to 2026-11-25T12:00Z] [--run-id ID]
                           [--docs-dir PATH]

Validates the Delta snapshot (the latest version, pinned for the whole run) of each chosen
table that exists; a table that does not exist yet is skipped, with a line. Only the rows in
the time range [--from, --to) are validated, placed in time by one column per table:

    bronze.events_raw, bronze.quarantine, silver.events   kafka_timestamp (when it arrived)
    speed.* and batch.* views                             window_start / session_start

The default range is the last 2 days up to now. silver.events' event times must lie between
the epoch (the contract sets no lower bound: historic events are valid) and --to plus the
speed layer's future tolerance (speed.future_tolerance_seconds), the rule the speed layer
applies to each record.

Each check of a suite has an action. FAIL: the table is wrong and the run fails. WARN: the
run goes on and says so. QUARANTINE: the offending rows go to dq.quality_quarantine (the row
as JSON, its "dq:<check>" reasons, the table and the version validated); taking them out of
the table itself is the table's one writer's job, so nothing is hidden and nothing is
rewritten here. Every run appends one row per validated table to dq.quality_runs (verdict,
broken checks with their counts, seconds, Data Docs page). Both writes carry the run id as
their Delta transaction id: rerunning a run id writes nothing twice.

Prints one summary line per table, then `Data Docs: <index.html>` (the Great Expectations
Data Docs site, default {state}/dq/data_docs, listing every run) and a `quality result:` line.

Exit status (jobs.contract): 0 every check passed or only WARN/QUARANTINE checks broke;
1 cannot run (config, storage, Spark, another quality run writing); 2 bad arguments (nothing
written); 4 a FAIL check broke (the broken checks and their first examples are printed; dq
records and Data Docs are written).
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from pathlib import Path

from jobs.arguments import iso_moment, say
from jobs.contract import Exit, exit_with, result_line
from jobs.parser import OneLineParser
from lakehouse.core.config import ConfigError, get_settings
from lakehouse.core.locks import WriterBusyError
from lakehouse.core.spark import SparkSetupError
from lakehouse.core.storage import StorageError
from lakehouse.quality.runs import (
    LAYERS,
    BadQualityRequest,
    QualityOutcome,
    QualityRequest,
    check_quality,
    result_of,
)

JOB = "quality"


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="python -m jobs.quality",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--layer",
        choices=list(LAYERS),
        help="the tables of a layer (default: all, unless --table is given)",
    )
    parser.add_argument(
        "--table",
        dest="tables",
        action="extend",
        nargs="+",
        default=[],
        metavar="NAME",
        help=f"a table to validate (repeatable): {', '.join(LAYERS['all'])}",
    )
    parser.add_argument("--from", dest="start", type=iso_moment, help="first instant (UTC)")
    parser.add_argument("--to", dest="end", type=iso_moment, help="end instant, exclusive (UTC)")
    parser.add_argument("--run-id", help="the run's identity in dq.* (Airflow passes its run id)")
    parser.add_argument(
        "--docs-dir", type=Path, help="the Data Docs site (default: {state}/dq/data_docs)"
    )
    return parser


def report(outcome: QualityOutcome) -> Exit:
    for v in outcome.validated:
        say(v.summary())
    if not outcome.validated:
        say("quality: no table to validate yet: nothing written")
    if outcome.docs_index is not None:
        say(f"Data Docs: {outcome.docs_index}")
    result = result_of(outcome)
    say(result_line(JOB, result))
    for broken in result["failed_checks"]:
        say(f"FAIL check broken: {broken}")
    return Exit.CHECKS_FAILED if outcome.failed else Exit.OK


def main(argv: list[str]) -> Exit:
    args = build_parser().parse_args(argv)  # exits with status 2 on unusable arguments
    now = datetime.now(UTC)
    try:
        request = QualityRequest.checked(
            args.layer, args.tables, args.start, args.end, args.run_id, args.docs_dir, now
        )
    except BadQualityRequest as err:
        print(f"quality: {err}; nothing written", file=sys.stderr)
        return Exit.BAD_REQUEST
    try:
        outcome = check_quality(get_settings(), request, say)
    except (ConfigError, SparkSetupError, StorageError, WriterBusyError) as err:
        print(f"quality: {err}", file=sys.stderr)
        return Exit.CANNOT_RUN
    return report(outcome)


if __name__ == "__main__":
    exit_with(main(sys.argv[1:]))
