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

import sys

from jobs.contract import Exit, exit_with
from jobs.stream_job import run_stream_job
from lakehouse.core.paths import speed_layer_stop_file
from lakehouse.speed.stream import run_speed_layer


def main(argv: list[str]) -> Exit:
    return run_stream_job(
        argv,
        prog="python -m jobs.speed_layer",
        doc=__doc__,
        title="speed layer",
        run=run_speed_layer,
        default_stop_file=speed_layer_stop_file,
    )


if __name__ == "__main__":
    exit_with(main(sys.argv[1:]))
