"""Jobs called in-process, as `python -m jobs.<name>` would run them: `main(argv)`, with the
environment a test sets and the process-wide settings read afresh for it."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from lakehouse.core.config import get_settings

JobEnv = Callable[..., None]


@pytest.fixture
def job_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[JobEnv]:
    """Set environment variables for the job under test (`job_env(TRIBUTARY_PROFILE="minio")`);
    the settings are read again with them, and as before once the test ends."""

    def apply(**env: str) -> None:
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        get_settings.cache_clear()

    get_settings.cache_clear()
    yield apply
    get_settings.cache_clear()
