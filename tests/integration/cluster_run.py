"""The pipeline the cluster test runs once on the cluster and once on local[2]: one driver
process runs the speed layer over what the topic holds (--available-now), the batch layer
over the closed hours given, a replay of the topic into version v1, the quality suites of
two tables (QUALITY_TABLES) and the reconciliation of batch against speed over those hours;
then writes to a JSON file each job's exit status and every table they wrote (rows as text,
sorted, the times a row was processed and a run's own timings left out) and, when its web UI
is on, its executors as Spark's REST API lists them and the master's account of the
application.

    python -m tests.integration.cluster_run OUT.json START END [MASTER_WEB_URL]

Settings come from the environment, as for any job (tests/integration/test_cluster.py).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from jobs import batch_layer, quality, reconcile, replay, speed_layer
from jobs.contract import Exit, describe
from lakehouse.core.config import get_settings
from lakehouse.core.delta_io import read_table
from lakehouse.core.spark import get_spark
from lakehouse.core.tables import Table, table
from lakehouse.speed.outputs import SpeedOutputs
from lakehouse.transforms.views import VIEWS
from tests.integration.service_json import read_json

REPLAY_VERSION = "v1"
# What the cluster adds to a quality run is where its suites execute, the same for any table:
# the largest table and a view, not every layer (tests/integration/test_quality*.py do those).
QUALITY_TABLES = ("bronze.events_raw", "batch.event_counts_1m")


def compared() -> dict[str, Table]:
    """What the two runs must agree on: the speed layer's and the batch layer's views, the
    clean events, the late and the quarantined records, the replay's own tables, and what the
    quality runs and the reconciliation recorded. (A replay reads the whole topic in one
    micro-batch: nothing is late to it.)"""
    replay = SpeedOutputs.replay(REPLAY_VERSION)
    names = (
        "silver.events",
        "speed.late_events",
        "bronze.quarantine",
        *(v.speed_table for v in VIEWS.values()),
        *(v.batch_table for v in VIEWS.values()),
        "dq.quality_runs",
        "dq.reconciliation_windows",
        "dq.reconciliation_runs",
    )
    replayed = (
        replay.quarantine,
        replay.silver,
        replay.counts,
        replay.active_users,
        replay.sessions,
    )
    return {**{n: table(n) for n in names}, **{t.name: t for t in replayed}}


# When a row was written, what a run took and its name, not what it says: differs between
# any two runs.
RUN_SPECIFIC = {
    "run_id",
    "report_path",
    "started_at",
    "ingested_at",
    "quarantined_at",
    "processed_at",
    "detected_at",
    "computed_at",
    "checked_at",
    "seconds",
    "data_docs",
}


def _value(value: Any) -> Any:
    # Arrays of users are sets: their order is how the rows met in a shuffle.
    if isinstance(value, list):
        return sorted(str(v) for v in value)
    return str(value)


def table_rows(stored: Table) -> list[str]:
    settings = get_settings()
    df = read_table(get_spark("cluster-check", settings), stored, settings)
    df = df.drop(*[c for c in df.columns if c in RUN_SPECIFIC])
    return sorted(
        json.dumps({k: _value(v) for k, v in row.asDict().items()}, sort_keys=True)
        for row in df.collect()
    )


def main(argv: list[str]) -> int:
    # tests.conftest, once imported, points the process at the test services' lakehouse and
    # topic: the pipeline would run on those instead of the ones its environment names.
    assert "tests.conftest" not in sys.modules, "cluster_run must not import tests.conftest"
    out, start, end, *master_web = argv
    # The two drivers share the state folder: each publishes its reports under its own name.
    run_id = f"cluster-check-{Path(out).stem}"
    span = ["--from", start, "--to", end, "--run-id", run_id]
    docs = ["--docs-dir", str(Path(out).with_suffix(".docs"))]
    steps = {
        "speed layer (session start included)": lambda: speed_layer.main(["--available-now"]),
        "batch layer": lambda: batch_layer.main(
            ["--start", start, "--end", end, "--run-id", "cluster-check"]
        ),
        "replay": lambda: replay.main(["--version", REPLAY_VERSION]),
        "quality": lambda: quality.main(["--table", *QUALITY_TABLES, *span, *docs]),
        "reconcile": lambda: reconcile.main(["--left", "batch", "--right", "speed", *span]),
    }
    seconds, statuses = {}, {}
    for step, run in steps.items():
        began = time.monotonic()
        statuses[step] = int(run())
        seconds[step] = time.monotonic() - began
        # A gate or a check may fail the same way on both sides (compared after); a job that
        # could not run at all ends the pipeline.
        if statuses[step] not in (Exit.OK, Exit.CHECKS_FAILED):
            print(f"{step} exited {describe(statuses[step])}", file=sys.stderr)
            return statuses[step]
    spark = get_spark("cluster-check")  # the session both jobs ran in
    context = spark.sparkContext
    found: dict[str, Any] = {
        "master": context.master,
        "app_id": context.applicationId,
        "tables": {name: table_rows(t) for name, t in compared().items()},
        "statuses": statuses,
        "seconds": seconds,
    }
    if context.uiWebUrl:
        api = f"{context.uiWebUrl}/api/v1/applications/{context.applicationId}"
        found["executors"] = read_json(f"{api}/executors")
    if master_web:
        found["master_state"] = read_json(f"{master_web[0]}/json/")
    Path(out).write_text(json.dumps(found, indent=1))
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
