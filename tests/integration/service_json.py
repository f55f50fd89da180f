"""A service's JSON answer over HTTP, for the cluster tests and the driver they start
(tests/integration/cluster_run.py). Nothing here may import tests.conftest: it points the
importing process at the test services, and the driver must keep the lakehouse, topic and
storage its environment names."""

from __future__ import annotations

import json
import urllib.request
from typing import Any


def read_json(url: str) -> Any:
    """The answer at `url`. The wait is a guard against a hang, not a claim on speed: a driver
    busy with a batch on a loaded 2-core machine may take tens of seconds to answer."""
    with urllib.request.urlopen(url, timeout=120) as answer:
        return json.loads(answer.read())
