"""The changelog stream: Debezium's changelog topics into the CDC tables.

    python -m jobs.cdc                  # run until stopped
    python -m jobs.cdc --available-now  # apply what the topics hold now, then exit

Reads every captured table's topic (`cdc.tables`: shop.public.<table>) from the earliest offset
(the checkpoint remembers where it is) and hands every micro-batch to lakehouse.cdc.changelog:
bronze.<table>_changes, silver.<table>_current and silver.<table>_history. Stopping gracefully:
Ctrl-C, SIGTERM, or create the stop file (default <state>/run/cdc.stop); the running batch
finishes first. Whatever way it stops, a restart continues exactly where it left off.

Exit status (jobs.contract): 0 stopped, 1 cannot run (config, Kafka, storage, Spark, another
changelog stream running), 2 bad arguments, 5 the query failed (a restart resumes it).
"""

from __future__ import annotations

import argparse
import sys

from jobs.arguments import say
from jobs.contract import Exit, exit_with
from jobs.parser import OneLineParser, add_stop_file
from lakehouse.core.config import ConfigError, get_settings
from lakehouse.core.kafka_io import KafkaUnavailableError
from lakehouse.core.locks import WriterBusyError
from lakehouse.core.paths import cdc_stop_file
from lakehouse.core.spark import SparkSetupError
from lakehouse.core.storage import StorageError
from lakehouse.speed.stream import QueryFailedError


def main(argv: list[str]) -> Exit:
    parser = OneLineParser(
        prog="python -m jobs.cdc",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--available-now", action="store_true", help="apply what the topics hold now, then exit"
    )
    add_stop_file(parser)
    args = parser.parse_args(argv)
    try:
        from lakehouse.cdc.stream import run_changelog

        settings = get_settings()
        run_changelog(settings, args.stop_file or cdc_stop_file(), args.available_now, say)
    except QueryFailedError as err:
        print(f"changelog stream failed: {err}", file=sys.stderr)
        return Exit.FAILED
    except (
        ConfigError,
        KafkaUnavailableError,
        SparkSetupError,
        StorageError,
        WriterBusyError,
    ) as err:
        print(f"changelog stream: {err}", file=sys.stderr)
        return Exit.CANNOT_RUN
    say("==> changelog stream stopped")
    return Exit.OK


if __name__ == "__main__":
    exit_with(main(sys.argv[1:]))
