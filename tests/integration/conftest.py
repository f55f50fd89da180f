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
from tests.integration.service_logs import log_tail, new_lines


@pytest.fixture(scope="session")
def services_settings() -> Settings:
    """What the Airflow services use (their tasks' settings): this process's environment,
    without the overrides a test's own settings add."""
    return load_settings(environ=dict(os.environ))


@pytest.fixture
def airflow(airflow_up: str, services_settings: Settings) -> Airflow:
    """The test Airflow's components, known by the pid files its start left."""
    return Airflow(Context(settings=services_settings, state=state_dir()))


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
    airflow: Airflow = request.getfixturevalue("airflow")
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
