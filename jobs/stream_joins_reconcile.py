"""Recompute the windowed stream-stream joins over their static inputs and compare them with
the streams' output.

    python -m jobs.stream_joins_reconcile

For each join (attribution, order_payments), as of its last recorded batch: the rows its
batches read, each judged on time or late by the watermark in force when it was read
(ops.join_progress), the same join over the on-time rows, all at once, against the stream's
output, row for row. Late rows and the pairs they cost, and orders whose hour the watermark
has not passed yet (open), are counted, not hidden. Prints each verdict and
`stream_joins_reconcile result: {...}`; writes nothing.

Exit status (jobs.contract): 0 equal; 1 cannot run (config, storage, Spark); 2 bad arguments;
3 nothing to compare: no join has completed a batch; 4 a join differs (the first differing
rows are printed last).
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

JOB = "stream_joins_reconcile"


def main(argv: list[str]) -> Exit:
    OneLineParser(
        prog="python -m jobs.stream_joins_reconcile",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    ).parse_args(argv)
    try:
        from lakehouse.joins.windowed_reconcile import reconcile_windowed_joins

        settings = get_settings()
        spark = get_spark_checked(JOB, settings)
        verdicts = reconcile_windowed_joins(spark, settings)
    except (ConfigError, SparkSetupError, StorageError) as err:
        print(f"{JOB}: {err}", file=sys.stderr)
        return Exit.CANNOT_RUN
    judged = [v for v in verdicts if v.batch_id is not None]
    for v in verdicts:
        if v.batch_id is None:
            say(f"{v.query}: no batch yet, nothing compared")
            continue
        say(
            f"{v.query} as of batch {v.batch_id} (watermark {v.watermark}): {v.compared} rows "
            f"compared, {v.differing} differ; late rows {v.late}, pairs they cost "
            f"{v.not_emitted_for_late}, open orders {v.open_orders}"
        )
    failures = [f"{v.query}: {e}" for v in judged for e in v.examples]
    result = {
        "equal": bool(judged) and all(v.equal for v in judged),
        "joins": {
            v.query: {
                "batch_id": v.batch_id,
                "watermark": None if v.watermark is None else v.watermark.isoformat(),
                "compared": v.compared,
                "differing": v.differing,
                "late": v.late,
                "not_emitted_for_late": v.not_emitted_for_late,
                "open_orders": v.open_orders,
            }
            for v in verdicts
        },
        "failures": failures,
    }
    say(result_line(JOB, result))
    if not judged:
        print(f"{JOB}: no stream join has completed a batch: nothing compared", file=sys.stderr)
        return Exit.NOTHING_TO_DO
    failed = [v for v in judged if not v.equal]
    if failed:
        verdict = "stream joins reconciliation failed: " + ", ".join(
            f"{v.query} ({v.differing} differ)" for v in failed
        )
        print("\n".join([verdict, *failures]), file=sys.stderr)
        return Exit.CHECKS_FAILED
    say("stream joins reconciliation passed: every join equals its batch join over on-time rows")
    return Exit.OK


if __name__ == "__main__":
    exit_with(main(sys.argv[1:]))
