"""Fixtures for the integration tests only; the shared ones are in tests/conftest.py."""

from __future__ import annotations

import os
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest

from infra.services.airflow import COMPONENTS, Airflow
from infra.services.base import Context
from infra.services.keeper import MARK
from lakehouse.core.config import Settings, load_settings
from lakehouse.core.kafka_io import ensure_topic
from lakehouse.core.paths import state_dir
from tests.integration.airflow_client import Api, login
from tests.integration.browser import Browser, start_browser
from tests.integration.loopback_cluster import cluster  # noqa: F401  (the cluster tests' fixture)


@pytest.fixture(scope="session")
def services_settings() -> Settings:
    """What the Airflow services use (their tasks' settings): this process's environment,
    without the overrides a test's own settings add."""
    return load_settings(environ=dict(os.environ))


@pytest.fixture(autouse=True)
def airflow_left_running(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test of the test Airflow leaves each of its components running, none of them started
    again by its keeper (infra/services/keeper.py) meanwhile: a component that exits (a
    scheduler whose loop raised) is a bug to see, not to sleep through. One that died is
    started again, so the Airflow tests after this one do not fail on its timeouts; this test
    fails with the end of its log."""
    if "airflow_up" not in request.fixturenames:
        yield
        return
    settings: Settings = request.getfixturevalue("services_settings")
    airflow = Airflow(Context(settings=settings, state=state_dir()))
    logs = {name: airflow.proc(name).log_file for name in COMPONENTS}
    sizes = {name: log.stat().st_size if log.is_file() else 0 for name, log in logs.items()}
    yield
    dead = [name for name in COMPONENTS if airflow.proc(name).pid() is None]
    for name in dead:
        airflow.restart_component(name)
    said = {name: new_lines(log, sizes[name]) for name, log in logs.items()}
    expected = request.node.get_closest_marker("restarts_airflow") is not None
    restarted = {name: lines for name, lines in said.items() if MARK in lines and not expected}
    if dead or restarted:
        ends = "\n".join(f"--- {name}:\n{log_tail(said[name])}" for name in {*dead, *restarted})
        pytest.fail(
            f"Airflow's {', '.join(sorted({*dead, *restarted}))} exited during this test "
            f"(started again):\n{ends}"
        )


def new_lines(log: Path, since: int) -> str:
    """What `log` gained after its first `since` bytes."""
    if not log.is_file():
        return ""
    with open(log, "rb") as f:
        f.seek(since)
        return f.read().decode(errors="replace")


def log_tail(text: str, lines: int = 40) -> str:
    """The last lines of a log before the process was started again: up to the keeper's line
    saying it exited, or else up to the line Proc.start writes."""
    if MARK in text:
        end = text.find("\n", text.rindex(MARK))
        before_restart = text if end == -1 else text[:end]
    else:
        before_restart = text.rsplit("\n--- 20", 1)[0]
    return "\n".join(before_restart.splitlines()[-lines:])


@pytest.fixture(scope="module")
def api(airflow_up: str, kafka_up: str, minio_settings: Settings) -> Iterator[Api]:
    """The running Airflow's REST API, logged in as the admin user. The DAGs' jobs read and
    write the live topic, which each run's new Kafka log (infra/test_env.py) lacks at first,
    as a new installation does until `make up` creates it."""
    ensure_topic(minio_settings)
    client = login(airflow_up, minio_settings)
    yield client
    client.close()


# --- browser tests ---------------------------------------------------------------------------

FAILED = pytest.StashKey[bool]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Remember a failed test body, so that the `browser` fixture keeps its last screen."""
    report = yield
    if report.when == "call" and report.failed:
        item.stash[FAILED] = True
    return report


@pytest.fixture
def browser(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Browser]:
    """Headless Chromium (Debian's, driven through /usr/bin/chromedriver) with a new empty
    profile and a 1400x1000 window; `browser.screenshot(name)` keeps the page under
    tests/artifacts/screenshots/. Fails, never skips, when Chromium is not installed. A failed
    test's last screen is kept as FAILED-<test>.png."""
    driver = start_browser(tmp_path / "chromium")
    try:
        yield driver
    finally:
        if request.node.stash.get(FAILED, False):
            driver.screenshot(f"FAILED-{request.node.name}")
        driver.quit()
