"""Jobs run in the test's own process, as `python -m jobs.<name> ARGS` would run them: its
`main(argv)`, with the environment the test gives, the settings read afresh for it, and what it
printed captured. A JVM and an interpreter start cost seconds each; only a test of the process
itself (signals, kill -9) needs a process of its own."""

from __future__ import annotations

import importlib
import signal
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pytest

from lakehouse.core.config import get_settings
from lakehouse.core.spark import get_spark as _real_get_spark


@dataclass(frozen=True)
class Ran:
    """A job's exit status and output, named as subprocess.CompletedProcess names them."""

    returncode: int
    stdout: str
    stderr: str


RunJob = Callable[..., Ran]


@pytest.fixture
def run_job_here(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Iterator[RunJob]:
    """`run_job_here("jobs.reconcile", "--left", "batch", TRIBUTARY_PROFILE="local")`."""
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}

    def run(module: str, *argv: str, **env: str) -> Ran:
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        get_settings.cache_clear()
        capsys.readouterr()  # what came before is not the job's
        try:
            status = int(importlib.import_module(module).main(list(argv)))
        except SystemExit as exited:  # argparse's refusals
            status = exited.code if isinstance(exited.code, int) else 1
        finally:
            # A job listens for SIGINT and SIGTERM to stop gracefully; pytest's Ctrl-C is back.
            for sig, handler in handlers.items():
                signal.signal(sig, handler)
        out = capsys.readouterr()
        return Ran(status, out.out, out.err)

    yield run
    monkeypatch.undo()
    get_settings.cache_clear()


@pytest.fixture
def spark_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """A test whose job must answer without Spark: starting (or reusing) a session fails it."""
    refuse_spark(monkeypatch)


# Whether refuse_spark is in force (monkeypatch puts it back to False).
_refusing = False
# Where a module may have imported the session factory itself.
PACKAGES = {"jobs", "lakehouse", "dags", "bench", "tests"}


def _get_spark_unless_refused(*args: Any, **kwargs: Any) -> Any:
    if _refusing:
        raise AssertionError("the job asked for a SparkSession")
    return _real_get_spark(*args, **kwargs)


def refuse_spark(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail any call of the session factory until `monkeypatch` is undone: the factory's own
    module, and every module that imported the function itself (a job's `from
    lakehouse.core.spark import get_spark`, imported before or while this is in force: such a
    module keeps the guard, which lets calls through again once it is undone)."""
    import sys

    import lakehouse.core.spark

    monkeypatch.setattr(sys.modules[__name__], "_refusing", True)
    ours = [m for name, m in list(sys.modules.items()) if name.split(".")[0] in PACKAGES]
    for module in [lakehouse.core.spark, *ours]:
        # The module's own names only: vars(), not getattr(), which would call a module's
        # __getattr__ (Airflow's deprecation shims warn on every name asked for).
        if vars(module).get("get_spark") is _real_get_spark:
            monkeypatch.setattr(module, "get_spark", _get_spark_unless_refused)


def batch_job_without_spark(
    run: RunJob,
    monkeypatch: pytest.MonkeyPatch,
    module: str,
    interval: tuple[datetime, datetime],
    env: dict[str, str],
) -> Ran:
    """A batch job (`module`) run by `run` (run_job_here) over `interval` (start, end), which
    must answer before it starts Spark."""
    start, end = interval
    with monkeypatch.context() as no_spark:
        refuse_spark(no_spark)
        return run(module, "--start", start.isoformat(), "--end", end.isoformat(), **env)
