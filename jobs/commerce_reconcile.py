"""Fold bronze.commerce_raw again, all at once, and compare it with the live order state.

    python -m jobs.commerce_reconcile

Both sides as the commerce stream's last completed batch left them (a stream running
meanwhile moves neither): silver.order_state against the batch fold of every order event in
bronze.commerce_raw, with the stream's own functions (lakehouse.commerce.rebuild). Prints the
first differing rows and `commerce_reconcile result: {...}`; writes nothing.

Exit status (jobs.contract): 0 equal; 1 cannot run (config, storage, Spark, or the stream
committed too many batches meanwhile: run it again); 2 bad arguments; 3 the stream has
completed no batch yet; 4 the states differ.
"""

from __future__ import annotations

import argparse
import sys

from jobs.arguments import say
from jobs.contract import Exit, exit_with, result_line
from jobs.parser import OneLineParser
from lakehouse.core.config import ConfigError, get_settings
from lakehouse.core.spark import SparkSetupError, get_spark_checked
from lakehouse.core.storage import StorageError

JOB = "commerce_reconcile"
SHOWN = 10  # differing rows printed


def main(argv: list[str]) -> Exit:
    OneLineParser(
        prog="python -m jobs.commerce_reconcile",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    ).parse_args(argv)
    try:
        settings = get_settings()
        spark = get_spark_checked(JOB, settings)
        from lakehouse.commerce.rebuild import NothingToCompare, judge_live_state

        try:
            judged = judge_live_state(spark, settings)
        except NothingToCompare as err:
            print(f"{JOB}: {err}", file=sys.stderr)
            return Exit.NOTHING_TO_DO
        differing = judged.differences.limit(SHOWN).collect()
        differences = judged.differences.count() if differing else 0
    except (ConfigError, SparkSetupError, StorageError, LookupError) as err:
        print(f"{JOB}: {err}", file=sys.stderr)
        return Exit.CANNOT_RUN
    result = {
        "app_id": judged.app_id,
        "batch_id": judged.batch_id,
        "orders": judged.orders,
        "differences": differences,
        "verdict": "equal" if not differences else "differ",
    }
    say(
        f"==> order state as of batch {judged.batch_id}: {judged.orders} orders, "
        f"{differences} rows differ"
    )
    say(result_line(JOB, result))
    if differences:
        rows = [str(row.asDict()) for row in differing]
        print(
            "\n".join(["the live order state differs from the batch fold:", *rows]), file=sys.stderr
        )
        return Exit.CHECKS_FAILED
    return Exit.OK


if __name__ == "__main__":
    exit_with(main(sys.argv[1:]))
