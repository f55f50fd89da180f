"""The DAGs of the join streams (issue 32) run for real by the test Airflow, through its REST
API, on the services' Kafka and lakehouse, side by side: `commerce`, `enrichment` and
`stream_joins`. Each run with `ensure` starts its stream as a process of its own, waits for its
first micro-batch (check_health) and then reconciles its output with the recompute (the judge's
verdict in dq.reconciliation_runs or the task's result); a run with `stop` stops it and skips
the health check and the judge. The tasks' refusals and branches run in-process in tests/dags.

The inputs are this module's: click events (purchases among them) in the `events` topic, caught
up into silver by the speed layer in-process; orders with their payments in the commerce
topics, a first part folded in-process (so silver.order_events, which stream_joins reads, is
there when it starts) and a second part left for the commerce DAG's stream. The streams are
the services' own ones, so the module stops them at the end and puts their holds back as they
were.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow.compute as pc
import pytest

from lakehouse.commerce.outputs import CommerceOutputs
from lakehouse.commerce.stream import start_commerce_query
from lakehouse.commerce.supervisor import CommerceSupervisor
from lakehouse.core.config import Settings
from lakehouse.core.locks import exclusive_writer
from lakehouse.core.small_tables import table_rows
from lakehouse.core.tables import table
from lakehouse.generator import commerce
from lakehouse.generator.clickstream import GeneratorConfig, produce
from lakehouse.generator.ledger import read_ledger
from lakehouse.joins.supervisor import EnrichmentSupervisor
from lakehouse.joins.windowed_supervisor import StreamJoinsSupervisor
from lakehouse.reconcile.joins import recorded_run_id
from lakehouse.speed.supervisor import StreamSupervisor, group_members
from tests.integration import airflow_client as af
from tests.integration.batch_hours import catch_up_speed_layer

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SUPERVISORS = {
    "commerce": CommerceSupervisor,
    "enrichment": EnrichmentSupervisor,
    "stream_joins": StreamJoinsSupervisor,
}
# A start waits for Spark and the stream's first micro-batch; the judge starts Spark too.
RUN_TIMEOUT = 600


@pytest.fixture(scope="module")
def streams(
    api: af.Api, services_settings: Settings, kafka_up: str
) -> Iterator[dict[str, StreamSupervisor]]:
    """Each DAG's stream supervisor, as its tasks build it, the DAGs parsed; afterwards every
    stream stopped and its hold put back as it was."""
    supervisors = {dag: cls(services_settings) for dag, cls in SUPERVISORS.items()}
    for dag_id in supervisors:
        af.wait_parsed(api, dag_id)
    held = {dag: s.held() for dag, s in supervisors.items()}
    yield supervisors
    for dag, supervisor in supervisors.items():
        supervisor.stop()
        was = held[dag]
        if was:
            supervisor.hold_file.write_text(was + "\n")
        else:
            supervisor.hold_file.unlink(missing_ok=True)


@pytest.fixture(scope="module")
def inputs(
    spark: SparkSession,
    services_settings: Settings,
    kafka_up: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> list[dict[str, Any]]:
    """Clicks and purchases of the last hour in silver.events; orders with their payments in
    the commerce topics, the first part of them already folded. The second part's ledger."""
    folder = tmp_path_factory.mktemp("join_dags")
    seed = random.randint(1, 10**9)
    clicks = GeneratorConfig(
        count=400, seed=seed, start=datetime.now(UTC) - timedelta(hours=1), rate=0.2
    )
    produce(services_settings, clicks, folder / "events.jsonl")
    catch_up_speed_layer(spark, services_settings)
    _produce_orders(services_settings, seed, folder / "folded.jsonl")
    with exclusive_writer(services_settings, CommerceOutputs.live().lock, wait_seconds=120):
        start_commerce_query(
            spark, services_settings, CommerceOutputs.live(), available_now=True
        ).awaitTermination()
    return _produce_orders(services_settings, seed + 1, folder / "left.jsonl")


def _produce_orders(settings: Settings, seed: int, ledger: Path) -> list[dict[str, Any]]:
    """30 orders, each lifecycle over by now (they last up to days), sent; their ledger."""
    now = datetime.now(UTC)
    probe = commerce.CommerceConfig(orders=30, seed=seed, start=now)
    orders = replace(probe, start=now - (probe.last_moment() - now) - timedelta(minutes=1))
    commerce.produce(settings, orders, ledger)
    return read_ledger(ledger)


def test_ensure_runs_start_each_join_stream_check_it_and_find_it_equal_to_its_recompute(
    api: af.Api,
    streams: dict[str, StreamSupervisor],
    inputs: list[dict[str, Any]],
    services_settings: Settings,
) -> None:
    for supervisor in streams.values():
        supervisor.stop()
        supervisor.hold_file.unlink(missing_ok=True)
    runs = _ensure_runs(api, list(streams))

    for dag_id, run_id in runs.items():
        status = streams[dag_id].status()
        assert status.running, f"{dag_id}: {status.describe()}"
        started = af.xcom(api, dag_id, run_id, "supervise")
        assert started["running"] and started["pid"] == status.pid, (dag_id, started)
        health = af.xcom(api, dag_id, run_id, "check_health")
        assert health["status"] == "healthy" and health["batch_id"] is not None, (dag_id, health)
    # The commerce DAG's stream took in the orders left for it.
    orders = {r["order_id"] for r in inputs if r.get("order_id")}
    folded = table_rows(
        services_settings, table("silver.order_state"), pc.field("order_id").isin(list(orders))
    )
    assert folded, "none of the orders left for the stream is in silver.order_state"
    # The judges found each stream's output equal to its recompute, and compared something.
    for dag_id in ("commerce", "stream_joins"):
        judged = table_rows(
            services_settings,
            table("dq.reconciliation_runs"),
            pc.field("run_id") == recorded_run_id(runs[dag_id]),
        )
        assert {r["verdict"] for r in judged} == {"passed"}, (dag_id, judged)
        assert sum(r["compared"] for r in judged) > 0, (dag_id, judged)
    verdict = af.xcom(api, "enrichment", runs["enrichment"], "reconcile")
    assert verdict["equal"] and verdict["events"]["compared"] > 0, verdict


def test_stop_runs_stop_each_stream_and_skip_its_health_check_and_judge(
    api: af.Api, streams: dict[str, StreamSupervisor]
) -> None:
    pids = {dag_id: s.status().pid for dag_id, s in streams.items()}
    assert None not in pids.values(), f"the previous test leaves them running: {pids}"
    runs = _run_side_by_side(api, dict.fromkeys(streams, "stop"))
    for dag_id, states in runs.values():
        assert states == {
            "supervise": "success",
            "check_health": "skipped",
            "reconcile": "skipped",
        }, (
            dag_id,
            states,
        )
        assert not streams[dag_id].status().running, dag_id
        assert not group_members(pids[dag_id] or 0), f"{dag_id}: a process of it is left"
        assert streams[dag_id].held(), f"{dag_id}: a scheduled ensure would start it again"


# --- helpers -------------------------------------------------------------------------------


def _ensure_runs(api: af.Api, dag_ids: list[str]) -> dict[str, str]:
    """Runs with `ensure` of the DAGs, side by side; their ids, by DAG, once every task of
    each has succeeded."""
    runs = _run_side_by_side(api, dict.fromkeys(dag_ids, "ensure"))
    for dag_id, states in runs.values():
        assert set(states.values()) == {"success"}, (dag_id, states)
    return {dag_id: run_id for run_id, (dag_id, _) in runs.items()}


def _run_side_by_side(
    api: af.Api, actions: dict[str, str]
) -> dict[str, tuple[str, dict[str, str]]]:
    """A run of each DAG with its action, first in line (before the scheduled run unpausing
    creates), the DAGs unpaused together. Each DAG is paused again once every task of its run
    has started or been skipped: its scheduled run, which would start the moment this one
    ends, stays queued and is marked failed (a paused DAG's running tasks finish; the run itself is
    marked finished at the next unpause, so its tasks are what is waited for). Each run's DAG
    and its tasks' states, by run id, once they have all ended. Fails with every task's log of
    a run with a task that failed."""
    runs = {
        str(
            af.trigger_run(api, dag_id, {"action": action}, run_after=af.BEFORE_SCHEDULED_RUNS)[
                "dag_run_id"
            ]
        ): dag_id
        for dag_id, action in actions.items()
    }
    tis: dict[str, list[dict[str, Any]]] = {}

    def states_of(run_id: str) -> set[str | None]:
        path = f"/dags/{runs[run_id]}/dagRuns/{run_id}/taskInstances"
        tis[run_id] = af.expect_json(api.call("GET", path), 200)["task_instances"]
        return {ti["state"] for ti in tis[run_id]}

    unpaused = {run_id: ExitStack() for run_id in runs}
    try:
        for run_id, dag_id in runs.items():
            unpaused[run_id].enter_context(af.unpaused(api, dag_id))

        released: set[str] = set()

        def all_under_way() -> bool:
            for run_id, stack in unpaused.items():
                if run_id not in released and not states_of(run_id) & {None, "scheduled", "queued"}:
                    stack.close()
                    released.add(run_id)
            return len(released) == len(runs)

        af.wait_until(all_under_way, RUN_TIMEOUT, f"every task of {runs} to start", interval=1)
    finally:
        for stack in unpaused.values():
            stack.close()
    ended = {"success", "skipped", "failed", "upstream_failed"}
    af.wait_until(
        lambda: all(states_of(run_id) <= ended for run_id in runs),
        RUN_TIMEOUT,
        f"every task of {runs} to end",
        interval=2,
    )
    found = {}
    for run_id, dag_id in runs.items():
        af.end_queued_scheduled_runs(api, dag_id)
        if states_of(run_id) & {"failed", "upstream_failed"}:
            report = af.tasks_report(
                tis[run_id], af.task_logs(api, dag_id, run_id, tis[run_id]), lines=30
            )
            pytest.fail(f"{dag_id} run {run_id} has a failed task:\n{report}")
        found[run_id] = (dag_id, af.task_states(tis[run_id]))
    return found
