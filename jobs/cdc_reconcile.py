"""Recompute the CDC tables from bronze and compare them with the changelog stream's.

    python -m jobs.cdc_reconcile

For every captured table (`cdc.tables`): its current rows and type-2 history recomputed from
bronze.<table>_changes alone, against silver.<table>_current and silver.<table>_history, as of
the stream's last completed batch (a key with a change still in flight is left out and
counted). Prints one line per table and `cdc_reconcile result: {...}`.

Exit status (jobs.contract): 0 every table equal; 1 cannot run (config, storage, Spark);
3 nothing to compare (the stream has completed no batch); 4 a table differs (its first
differences are printed).
"""

from __future__ import annotations

import sys
from dataclasses import asdict

from jobs.arguments import say
from jobs.contract import Exit, exit_with, result_line
from jobs.parser import OneLineParser
from lakehouse.core.config import ConfigError, get_settings
from lakehouse.core.spark import SparkSetupError
from lakehouse.core.storage import StorageError

JOB = "cdc_reconcile"


def main(argv: list[str]) -> Exit:
    OneLineParser(prog="python -m jobs.cdc_reconcile", description=__doc__).parse_args(argv)
    try:
        from lakehouse.cdc.reconcile import NothingToReconcile, reconcile_changelog
        from lakehouse.core.spark import get_spark_checked

        settings = get_settings()
        spark = get_spark_checked(JOB, settings)
        try:
            tables = reconcile_changelog(spark, settings)
        except NothingToReconcile as err:
            print(f"{JOB}: {err}: nothing compared", file=sys.stderr)
            return Exit.NOTHING_TO_DO
    except (ConfigError, SparkSetupError, StorageError) as err:
        print(f"{JOB}: {err}", file=sys.stderr)
        return Exit.CANNOT_RUN
    for t in tables:
        verdict = "equal" if t.equal else "DIFFERENT"
        say(
            f"==> {t.table}: {verdict} as of batch {t.batch_id}: {t.compared_keys} keys compared, "
            f"{t.in_flight_keys} in flight, {t.current_differences} current rows and "
            f"{t.history_differences} versions differ"
        )
        for example in t.examples:
            say(f"    {example}")
    say(result_line(JOB, {"tables": [asdict(t) for t in tables]}))
    return Exit.OK if all(t.equal for t in tables) else Exit.CHECKS_FAILED


if __name__ == "__main__":
    exit_with(main(sys.argv[1:]))
