"""Fixtures for the integration tests only; the shared ones are in tests/conftest.py."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from lakehouse.config import Settings
from tests.integration.airflow_client import Api, login


@pytest.fixture(scope="module")
def api(airflow_up: str, minio_settings: Settings) -> Iterator[Api]:
    """The running Airflow's REST API, logged in as the admin user."""
    client = login(airflow_up, minio_settings)
    yield client
    client.close()
