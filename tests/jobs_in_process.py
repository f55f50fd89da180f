"""Jobs run in the test's own process, as `python -m jobs.<name> ARGS` would run them: its
`main(argv)`, with the environment the test gives, the settings read afresh for it, and what it
printed captured. A JVM and an interpreter start cost seconds each; only a test of the process
itself (signals, kill -9) needs a process of its own."""

from __future__ import annotations

import importlib
import signal
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

from lakehouse.core.config import get_settings


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


def refuse_spark(monkeypatch: pytest.MonkeyPatch) -> None:
    import lakehouse.core.spark

    def refused(*args: object, **kwargs: object) -> None:
        raise AssertionError("the job asked for a SparkSession")

    monkeypatch.setattr(lakehouse.core.spark, "get_spark", refused)
