"""The speed layer: one long-running Spark Structured Streaming application.

    python -m jobs.speed_layer                  # run until stopped
    python -m jobs.speed_layer --available-now  # process what the log holds now, then exit

Reads the `events` topic from the earliest offset (the checkpoint remembers where it is) and
hands every micro-batch to lakehouse.speed.micro_batch. Stopping gracefully: Ctrl-C, SIGTERM,
or create the stop file (default <state>/run/speed_layer.stop); the running batch finishes
first, then the query stops. Whatever way it stops, a restart continues exactly where it left off.

Exit status (jobs.contract): 0 stopped, 1 cannot run (config, Kafka, storage, Spark, another
speed layer running), 2 bad arguments, 5 the query failed (a restart resumes it).
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
from lakehouse.core.paths import speed_layer_stop_file
from lakehouse.core.spark import SparkSetupError
from lakehouse.core.storage import StorageError
from lakehouse.speed.stream import QueryFailedError, run_speed_layer


def main(argv: list[str]) -> Exit:
    parser = OneLineParser(
        prog="python -m jobs.speed_layer",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--available-now", action="store_true", help="process everything in the log now, then exit"
    )
    add_stop_file(parser)
    args = parser.parse_args(argv)
    try:
        settings = get_settings()
        run_speed_layer(
            settings, args.stop_file or speed_layer_stop_file(), args.available_now, say
        )
    except QueryFailedError as err:
        print(f"speed layer failed: {err}", file=sys.stderr)
        return Exit.FAILED
    except (
        ConfigError,
        KafkaUnavailableError,
        SparkSetupError,
        StorageError,
        WriterBusyError,
    ) as err:
        print(f"speed layer: {err}", file=sys.stderr)
        return Exit.CANNOT_RUN
    say("==> speed layer stopped")
    return Exit.OK


if __name__ == "__main__":
    exit_with(main(sys.argv[1:]))
