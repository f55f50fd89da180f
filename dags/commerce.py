"""Keeps the commerce stream (jobs/commerce.py) running and healthy, and reconciles the order
state it folds with the batch fold of the log; start/stop/restart it (an Airflow DAG)."""

from __future__ import annotations

from dags.support.stream_dag import supervised_stream_dag

DOC = """
### Commerce (payments and the event-sourced order state)

The `payments` and `order-events` topics, read by the commerce stream
(`python -m jobs.commerce`) → `bronze.commerce_raw`, `bronze.commerce_quarantine`,
`silver.payments`, `silver.order_events`, and each order's state folded from its events in
log order → `silver.order_state`; a transition the lifecycle forbids (shipped before paid)
is recorded in `silver.order_transitions_rejected`, not applied. See docs/joins.md.

Every 5 minutes (one run at a time) this DAG:

1. **supervise**: starts the stream if it is not running (a detached process, pid file
   `<state>/run/commerce.pid`, log `<state>/run/logs/commerce.log`), as `action` says.
2. **check_health**: the stream is *stale* when no batch came for `speed.stale_after_seconds`
   while its topics hold records it has not read → it is **restarted** and the task fails
   saying so; otherwise one line with its newest batch.
3. **reconcile** (after a healthy check_health; skipped with it after a stop): the order state
   and the rejected transitions against the same fold over `bronze.commerce_raw` (`python -m
   jobs.joins_reconcile --join commerce`), recorded in `dq.reconciliation_runs`. **Fails**
   naming the first differing orders.
"""

supervised_stream_dag(
    "commerce",
    title="Commerce stream",
    supervisor="lakehouse.commerce.supervisor:CommerceSupervisor",
    judge="commerce",
    description="Keeps the commerce stream running and reconciles the order state with the log",
    doc_md=DOC,
)
