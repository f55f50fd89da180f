"""The one contract between a job and whoever runs it (a shell, a DAG task, a test).

Every job ends with one of these exit statuses, and a job whose outcome a caller reads prints
it as one result line: `<job> result: <JSON>`, its last such line. Standard library only: a DAG
task imports this to read a job's outcome without importing pyspark.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from enum import IntEnum, unique
from typing import Any, NoReturn


@unique
class Exit(IntEnum):
    """What a job's exit status means, the same for every job."""

    OK = 0
    # A service, the configuration, storage or another writer stopped it; nothing changed.
    CANNOT_RUN = 1
    # The arguments or the request were refused (argparse's own status); nothing changed.
    BAD_REQUEST = 2
    # Nothing to do: no events in the interval, no window final on both sides.
    NOTHING_TO_DO = 3
    # It ran and wrote, but the data failed its checks (a gate, a FAIL check): not served.
    CHECKS_FAILED = 4
    # It failed midway; running it again resumes from its checkpoint or redoes the work.
    FAILED = 5


RESULT_MARK = " result: "


def result_line(job: str, result: Mapping[str, Any]) -> str:
    """The line a job prints last to hand its outcome over: `batch result: {...}`."""
    return f"{job}{RESULT_MARK}{json.dumps(result, default=str)}"


def read_result(job: str, lines: Iterable[str]) -> dict[str, Any] | None:
    """The JSON of `job`'s last result line among `lines`, or None if it printed none."""
    prefix = f"{job}{RESULT_MARK}"
    found = [line[len(prefix) :] for line in lines if line.startswith(prefix)]
    if not found:
        return None
    result: dict[str, Any] = json.loads(found[-1])
    return result


def describe(status: int) -> str:
    """`5 (failed)`: a status as a person reads it; any number a process can end with."""
    try:
        return f"{status} ({Exit(status).name.lower().replace('_', ' ')})"
    except ValueError:
        return f"{status} (not a status of the contract: a crash or a signal)"


def exit_with(status: int) -> NoReturn:
    """End a job's process with `status` once its output is flushed, without Python's final
    teardown. Native thread pools (Arrow's, under delta-rs) can abort the interpreter while it
    tears down (SIGABRT, "terminate called without an active exception"), after the job's work
    and its result line are done: the caller would read a crash. Nothing is left to tear down
    that matters: every write has committed, locks are released, and Spark's JVM ends when
    its stdin closes with this process."""
    import logging
    import os
    import sys

    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    logging.shutdown()
    os._exit(int(status))
