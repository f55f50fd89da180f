"""Keeps the windowed stream-stream joins (jobs/stream_joins.py) running and healthy, and
reconciles their outputs with the batch joins of their inputs; start/stop/restart them (an
Airflow DAG)."""

from __future__ import annotations

from dags.support.stream_dag import supervised_stream_dag

DOC = """
### Stream joins (windowed stream-stream joins)

Two Structured Streaming queries in one application (`python -m jobs.stream_joins`), each
over two Delta streams with a watermark on each side; Spark keeps the join state and evicts
it as the watermarks pass:

- `silver.events`' purchases, each joined with its user's clicks on the product in the 30
  minutes before it (inner) → `silver.purchase_attribution`;
- `silver.order_events`' placed orders, each joined with its payments in the hour after it
  (left outer: an order unpaid when the watermark passes its hour is emitted once,
  `paid = false`) → `silver.order_payments`.

One `ops.join_progress` row per query and batch: watermark, rows in and out, the join state's
rows and bytes, rows dropped as late. See docs/joins.md.

Every 5 minutes (one run at a time) this DAG:

1. **supervise**: starts the joins if they are not running (a detached process, pid file
   `<state>/run/stream_joins.pid`, log `<state>/run/logs/stream_joins.log`), as `action` says.
2. **check_health**: *stale* when no batch came for `speed.stale_after_seconds` while their
   source tables have commits newer than they have read → **restarted**, and the task fails
   saying so; otherwise one line with the newest batch.
3. **reconcile** (after a healthy check_health; skipped with it after a stop): each output
   against the batch join over the input rows that were on time for the stream's watermark
   (`python -m jobs.joins_reconcile --join stream_joins`), recorded in
   `dq.reconciliation_runs`; the pairs late rows cost are counted as explained, orders whose
   hour is not over as open. **Fails** naming the first differing rows.
"""

supervised_stream_dag(
    "stream_joins",
    title="Stream joins",
    supervisor="lakehouse.joins.windowed_supervisor:StreamJoinsSupervisor",
    judge="stream_joins",
    description="Keeps the windowed stream-stream joins running and reconciles them",
    doc_md=DOC,
    resettable=True,
)
