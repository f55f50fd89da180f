"""What the long-running stream jobs (jobs.speed_layer, jobs.cdc) share: their arguments
(--available-now, --stop-file), the errors that mean the stream cannot run, and the exit
status each outcome maps to (jobs.contract)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from jobs.arguments import say
from jobs.contract import Exit
from jobs.parser import OneLineParser, add_stop_file
from lakehouse.core.config import ConfigError, Settings, get_settings
from lakehouse.core.kafka_io import KafkaUnavailableError
from lakehouse.core.locks import WriterBusyError
from lakehouse.core.spark import SparkSetupError
from lakehouse.core.storage import StorageError
from lakehouse.speed.stream import QueryFailedError

# The stream cannot start: nothing was read or written, the message says what to do.
CANNOT_RUN = (ConfigError, KafkaUnavailableError, SparkSetupError, StorageError, WriterBusyError)

# run(settings, stop_file, available_now, say): runs the query until it stops.
StreamRun = Callable[[Settings, Path, bool, Callable[[str], None]], None]
# reset(settings): removes the stream's tables and checkpoint; what it removed.
StreamReset = Callable[[Settings], list[str]]


def run_stream_job(
    argv: list[str],
    prog: str,
    doc: str | None,
    title: str,
    run: StreamRun,
    default_stop_file: Callable[[], Path],
    reset: StreamReset | None = None,
) -> Exit:
    """Parse `argv`, run the stream (or, with --reset when the stream has a `reset`, reset
    it), say how it ended. `title` names the stream in its messages ("speed layer")."""
    parser = OneLineParser(
        prog=prog, description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    once = parser.add_mutually_exclusive_group()
    once.add_argument(
        "--available-now", action="store_true", help="process what the log holds now, then exit"
    )
    if reset is not None:
        once.add_argument(
            "--reset",
            action="store_true",
            help="remove the stream's tables and checkpoint (refused while it runs), then exit",
        )
    add_stop_file(parser)
    args = parser.parse_args(argv)
    try:
        settings = get_settings()
        if reset is not None and args.reset:
            removed = reset(settings)
            say(f"==> {title} reset: removed {', '.join(removed) if removed else 'nothing'}")
            return Exit.OK
        run(settings, args.stop_file or default_stop_file(), args.available_now, say)
    except QueryFailedError as err:
        print(f"{title} failed: {err}", file=sys.stderr)
        return Exit.FAILED
    except CANNOT_RUN as err:
        print(f"{title}: {err}", file=sys.stderr)
        return Exit.CANNOT_RUN
    say(f"==> {title} stopped")
    return Exit.OK
