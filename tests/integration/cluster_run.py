"""The small pipeline the cluster test runs once on the cluster and once on local[2]: one
driver process runs the speed layer over what the topic holds (--available-now), then the
batch layer over the closed hours given, then writes to a JSON file every table they wrote
(rows as text, sorted, the times a row was processed left out) and, when its web UI is on,
its executors as Spark's REST API lists them and the master's account of the application.

    python -m tests.integration.cluster_run OUT.json START END [MASTER_WEB_URL]

Settings come from the environment, as for any job (tests/integration/test_cluster.py).
"""

from __future__ import annotations

import json
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from jobs import batch_layer, speed_layer
from lakehouse.core.config import get_settings
from lakehouse.core.delta_io import read_table
from lakehouse.core.spark import get_spark
from lakehouse.core.tables import table
from lakehouse.transforms.views import VIEWS

# What the two runs must agree on: the speed layer's and the batch layer's views, the clean
# events, the late and the quarantined records.
COMPARED = (
    "silver.events",
    "speed.late_events",
    "bronze.quarantine",
    *(v.speed_table for v in VIEWS.values()),
    *(v.batch_table for v in VIEWS.values()),
)
# When a row was written, not what it says: differs between any two runs.
PROCESSING_TIMES = {"ingested_at", "quarantined_at", "processed_at", "detected_at", "computed_at"}


def _value(value: Any) -> Any:
    # Arrays of users are sets: their order is how the rows met in a shuffle.
    if isinstance(value, list):
        return sorted(str(v) for v in value)
    return str(value)


def table_rows(name: str) -> list[str]:
    settings = get_settings()
    df = read_table(get_spark("cluster-check", settings), table(name), settings)
    df = df.drop(*[c for c in df.columns if c in PROCESSING_TIMES])
    return sorted(
        json.dumps({k: _value(v) for k, v in row.asDict().items()}, sort_keys=True)
        for row in df.collect()
    )


def _json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.load(response)


def main(argv: list[str]) -> int:
    out, start, end, *master_web = argv
    seconds = {}
    began = time.monotonic()
    status = speed_layer.main(["--available-now"])
    seconds["speed layer (session start included)"] = time.monotonic() - began
    if status != 0:
        print(f"speed layer exited {status}", file=sys.stderr)
        return int(status)
    began = time.monotonic()
    status = batch_layer.main(["--start", start, "--end", end, "--run-id", "cluster-check"])
    seconds["batch layer"] = time.monotonic() - began
    if status != 0:
        print(f"batch layer exited {status}", file=sys.stderr)
        return int(status)
    spark = get_spark("cluster-check")  # the session both jobs ran in
    context = spark.sparkContext
    found: dict[str, Any] = {
        "master": context.master,
        "app_id": context.applicationId,
        "tables": {name: table_rows(name) for name in COMPARED},
        "seconds": seconds,
    }
    if context.uiWebUrl:
        api = f"{context.uiWebUrl}/api/v1/applications/{context.applicationId}"
        found["executors"] = _json(f"{api}/executors")
    if master_web:
        found["master_state"] = _json(f"{master_web[0]}/json/")
    Path(out).write_text(json.dumps(found, indent=1))
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
