"""Replay the joins of a replay version, by the streams' own code, and judge them.

    python -m jobs.replay_joins v3

After `python -m jobs.replay` has written the version's events: the commerce stream from
offset 0 of its topics into `replay_<version>.order_events`, `.payments` and `.order_state`,
then the windowed stream-stream joins over the version's tables into
`replay_<version>.purchase_attribution` and `.order_payments` (lakehouse.joins.replay). Both
have checkpoints of their own: a second run continues with what the log and the version
gained since. Judged as the live ones: each join against the batch join of its on-time input
rows, and the order state against the batch fold of the version's order events. Prints
`replay_joins result: {...}`. The version's enrichment is `python -m jobs.enrich_replay`.

Exit status (jobs.contract): 0 replayed and equal; 1 cannot run (config, storage, Kafka, the
version has no events, Spark, the version's joins already running); 2 bad arguments; 4 a
join or the order state differs (the first differing rows are printed last); 5 a query failed
(run it again to resume).
"""

from __future__ import annotations

import argparse
import sys

from jobs.arguments import say
from jobs.contract import Exit, exit_with, result_line
from jobs.parser import OneLineParser, replay_version
from jobs.stream_job import CANNOT_RUN
from lakehouse.core.config import get_settings
from lakehouse.core.paths import state_dir
from lakehouse.speed.stream import QueryFailedError

JOB = "replay_joins"


def main(argv: list[str]) -> Exit:
    parser = OneLineParser(
        prog="python -m jobs.replay_joins",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "version", type=replay_version, help="the replay version whose joins to replay (e.g. v3)"
    )
    version = parser.parse_args(argv).version
    from lakehouse.core.spark import get_spark_checked
    from lakehouse.joins.replay import replay_joins

    stop_file = state_dir() / "run" / f"replay_{version}_joins.stop"
    try:
        settings = get_settings()
        spark = get_spark_checked(JOB, settings)
        replayed = replay_joins(spark, settings, version, stop_file, say)
    except QueryFailedError as err:
        print(f"{JOB}: {version}'s joins failed: {err}", file=sys.stderr)
        return Exit.FAILED
    except CANNOT_RUN as err:
        print(f"{JOB}: {err}", file=sys.stderr)
        return Exit.CANNOT_RUN
    result = replayed.result()
    say(result_line(JOB, result))
    if not replayed.equal:
        print("\n".join(result["failures"]), file=sys.stderr)
        return Exit.CHECKS_FAILED
    return Exit.OK


if __name__ == "__main__":
    exit_with(main(sys.argv[1:]))
