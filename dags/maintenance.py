"""Compact and vacuum the tables no stream looks after (jobs/maintenance.py), daily."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import Any

from airflow.sdk import dag, task

log = logging.getLogger("tributary.dags.maintenance")

DOC = """
### Maintenance

Daily, `python -m jobs.maintenance`: the bookkeeping tables (`ops.batch_runs`,
`ops.replay_versions`, `ops.serving_pointer`, `dq.*`) and the replay versions' tables gain a
small file with every run, promotion or check, and serving reads `ops.batch_runs` on every
query. Each table with `maintenance.compact_at_files` files or more is compacted, and the files
no version newer than `maintenance.vacuum_after_hours` ago reads are deleted, while the lock of
the job that writes it is held. The task log has a line per table (files before -> after, old
files deleted). A writer still busy after `maintenance.lock_wait_seconds` (a long replay) keeps
its tables as they are until the next run. The tables serving reads of a promoted replay
version are left alone (serving reads them at pinned versions, now or after a rollback).

The speed layer looks after its own tables as it runs, and the batch job vacuums the batch
views.
"""


@dag(
    dag_id="maintenance",
    schedule="@daily",
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    max_active_runs=1,
    tags=["tributary", "ops"],
    description="Compact and vacuum the bookkeeping tables and replay versions",
    doc_md=DOC,
)
def maintenance() -> None:
    @task(execution_timeout=timedelta(hours=2))
    def compact_and_vacuum() -> dict[str, Any]:
        from dags.support.job_runner import run_job

        outcome = run_job("jobs.maintenance", [], on_line=log.info)
        return outcome.summary("maintenance")

    compact_and_vacuum()


maintenance()
