"""The commerce stream on a real Kafka: jobs.generate_commerce sends order lifecycles and
payments to topics of this test's own, jobs.commerce folds them in several small
micro-batches, then a replay from offset 0 into a replay version and the batch fold of bronze
rebuild the order state: all three equal, and every record of the ledger met the fate the
ledger gives it (applied, rejected with its transition, a payment, a duplicate, quarantined
with its reason)."""

from __future__ import annotations

import importlib
import os
import signal
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from jobs.contract import Exit, read_result
from lakehouse.commerce.outputs import CommerceOutputs
from lakehouse.commerce.rebuild import fold_bronze, replay_commerce, state_differences
from lakehouse.core.config import Settings, get_settings, load_settings
from lakehouse.core.delta_io import append_new, read_table, small_frame
from lakehouse.generator.commerce import (
    FATE_APPLIED,
    FATE_DUPLICATE,
    FATE_PAYMENT,
    FATE_QUARANTINE,
    FATE_REJECTED,
    ORDER_EVENTS,
)
from lakehouse.generator.ledger import read_ledger
from lakehouse.joins.windowed import queries_of
from tests.conftest import new_topic

LIVE = CommerceOutputs.live()
BATCH_RECORDS = 60  # maxOffsetsPerTrigger: the log is read in several micro-batches


@dataclass(frozen=True)
class Streamed:
    settings: Settings
    ledger: list[dict[str, Any]]
    env: dict[str, str]  # the jobs' environment


def job_env(lake: Path, events_topic: str, payments_topic: str) -> dict[str, str]:
    return {
        "TRIBUTARY_PROFILE": "local",
        "TRIBUTARY__STORAGE__ROOT": str(lake / "lakehouse"),
        "TRIBUTARY__STORAGE__CHECKPOINTS": str(lake / "checkpoints"),
        "TRIBUTARY__KAFKA__ORDER_EVENTS_TOPIC": events_topic,
        "TRIBUTARY__KAFKA__PAYMENTS_TOPIC": payments_topic,
        "TRIBUTARY__SPEED__MAX_OFFSETS_PER_TRIGGER": str(BATCH_RECORDS),
    }


def run_here(module: str, argv: list[str], env: dict[str, str]) -> int:
    """A job's `main(argv)` in this process with `env` set, as tests/jobs_in_process.py runs
    one (that fixture is per test; this module's stream runs once, for all its tests)."""
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    with pytest.MonkeyPatch.context() as patch:
        for name, value in env.items():
            patch.setenv(name, value)
        get_settings.cache_clear()
        try:
            return int(importlib.import_module(module).main(argv))
        finally:
            get_settings.cache_clear()
            for sig, handler in handlers.items():
                signal.signal(sig, handler)


@pytest.fixture(scope="module")
def streamed(spark, kafka_up: str, tmp_path_factory: pytest.TempPathFactory) -> Streamed:
    folder = tmp_path_factory.mktemp("commerce")
    env = job_env(folder / "lake", new_topic("order-events"), new_topic("payments"))
    ledger = folder / "ledger.jsonl"
    argv = ["--orders", "30", "--seed", "11", "--ledger", str(ledger)]
    assert run_here("jobs.generate_commerce", argv, env) == Exit.OK
    stop_file = str(folder / "commerce.stop")
    assert run_here("jobs.commerce", ["--available-now", "--stop-file", stop_file], env) == Exit.OK
    return Streamed(load_settings("local", {**os.environ, **env}), read_ledger(ledger), env)


def rows(spark, settings: Settings, target) -> list[dict[str, Any]]:
    return [r.asDict() for r in read_table(spark, target, settings).collect()]


def test_the_stream_read_the_log_in_several_batches_each_record_accounted_for(
    spark, streamed: Streamed
) -> None:
    progress = rows(spark, streamed.settings, LIVE.progress)
    assert len(progress) > 2, "several micro-batches"
    for row in progress:
        parts = row["order_events"] + row["payments"] + row["quarantined"] + row["duplicates"]
        assert row["records"] == parts <= BATCH_RECORDS
    fates = Counter(entry["expected"] for entry in streamed.ledger)
    assert sum(r["records"] for r in progress) == len(streamed.ledger)
    assert sum(r["quarantined"] for r in progress) == fates[FATE_QUARANTINE]
    assert sum(r["duplicates"] for r in progress) == fates[FATE_DUPLICATE]
    assert sum(r["payments"] for r in progress) == fates[FATE_PAYMENT]
    assert sum(r["applied"] for r in progress) == fates[FATE_APPLIED]
    assert sum(r["rejected"] for r in progress) == fates[FATE_REJECTED] > 0
    assert len(rows(spark, streamed.settings, LIVE.raw)) == len(streamed.ledger)


def test_every_ledger_record_met_its_fate(spark, streamed: Streamed) -> None:
    settings = streamed.settings
    topics = {ORDER_EVENTS: settings.kafka.order_events_topic}
    topics["payments"] = settings.kafka.payments_topic

    def at(entry: dict[str, Any]) -> tuple[str, int, int]:
        return (topics[entry["topic"]], entry["partition"], entry["offset"])

    events = {
        (topics[ORDER_EVENTS], r["kafka_partition"], r["kafka_offset"]): r["event_id"]
        for r in rows(spark, settings, LIVE.order_events)
    }
    payments = {
        (topics["payments"], r["kafka_partition"], r["kafka_offset"]): r["payment_id"]
        for r in rows(spark, settings, LIVE.payments)
    }
    silver = events | payments
    quarantined = {
        (r["topic"], r["kafka_partition"], r["kafka_offset"]): r["reasons"]
        for r in rows(spark, settings, LIVE.quarantine)
    }
    rejected = {r["event_id"]: r["reason"] for r in rows(spark, settings, LIVE.rejected)}
    for entry in streamed.ledger:
        fate = entry["expected"]
        if fate == FATE_QUARANTINE:
            assert quarantined.get(at(entry)) == [entry["reason"]], entry
        elif fate == FATE_DUPLICATE:
            assert at(entry) not in silver and entry["id"] in silver.values(), entry
        else:
            assert silver.get(at(entry)) == entry["id"], entry
        if fate == FATE_REJECTED:
            assert rejected.get(entry["id"]) == entry["reason"], entry
    assert len(rejected) == sum(1 for e in streamed.ledger if e["expected"] == FATE_REJECTED)

    expected: dict[str, str] = {}
    for entry in streamed.ledger:
        if entry["topic"] == ORDER_EVENTS and entry["expected"] == FATE_APPLIED:
            expected[entry["order_id"]] = entry["type"]
    state = {r["order_id"]: r["status"] for r in rows(spark, settings, LIVE.state)}
    assert state == expected


def test_a_replay_from_offset_0_in_one_batch_and_the_batch_fold_rebuild_the_live_state(
    spark, streamed: Streamed
) -> None:
    settings = streamed.settings
    live = read_table(spark, LIVE.state, settings)
    # The replay reads the whole log in one batch: the state does not depend on the batches.
    whole = settings.speed.model_copy(update={"max_offsets_per_trigger": 1_000_000})
    replay = replay_commerce(spark, settings.model_copy(update={"speed": whole}), "t1")
    assert [r["batch_id"] for r in rows(spark, settings, replay.progress)] == [0]
    replayed = read_table(spark, replay.state, settings)
    assert state_differences(live, replayed).collect() == []
    assert live.count() == replayed.count() > 0
    folded, rejected = fold_bronze(spark, settings)
    assert state_differences(live, folded).collect() == []
    live_rejected = read_table(spark, LIVE.rejected, settings)
    assert state_differences(live_rejected, rejected).collect() == []
    # The same rejections, but for when each was received (rejected_at): once per reading.
    replay_rejected = read_table(spark, replay.rejected, settings).drop("rejected_at")
    assert state_differences(live_rejected.drop("rejected_at"), replay_rejected).collect() == []


def test_a_replay_versions_joins_replay_the_commerce_log_and_equal_their_judges(
    spark, streamed: Streamed, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """python -m jobs.replay_joins t2, after the version's events exist (jobs.replay writes
    them; here a click and the purchase a minute after it): the commerce stream replayed from
    offset 0 into the version rebuilds the live order state, and both windowed joins over the
    version's tables equal their batch joins."""
    settings = streamed.settings
    attribution, order_payments = queries_of("t2")
    start = datetime(2026, 11, 25, 10, 0, tzinfo=UTC)
    clicks = [
        {
            "event_id": f"e{i}",
            "event_type": kind,
            "user_id": "u1",
            "product_id": "p1",
            "amount": Decimal("5.00") if kind == "purchase" else None,
            "event_time": start + timedelta(minutes=i),
            "event_date": start.date(),
            "kafka_partition": 0,
            "kafka_offset": i,
        }
        for i, kind in enumerate(("click", "purchase"))
    ]
    events = attribution.left.source
    full = [{f.name: row.get(f.name) for f in events.spark_schema().fields} for row in clicks]
    append_new(small_frame(spark, full, events), events, settings)
    capsys.readouterr()
    env = {**streamed.env, "TRIBUTARY_STATE": str(tmp_path / "state")}
    env["TRIBUTARY__SPEED__MAX_OFFSETS_PER_TRIGGER"] = "1000000"  # the log in one batch
    assert run_here("jobs.replay_joins", ["t2"], env) == Exit.OK, capsys.readouterr().err
    result = read_result("replay_joins", capsys.readouterr().out.splitlines())
    assert result is not None and result["equal"], result
    live = read_table(spark, LIVE.state, settings)
    replayed = read_table(spark, CommerceOutputs.replay("t2").state, settings)
    assert state_differences(live, replayed).collect() == []
    assert result["order_state"] == {"orders": live.count(), "differing": 0}
    assert result["joins"]["attribution"]["compared"] == 1
    joined = result["joins"]["order_payments"]
    assert joined["compared"] > 0 and joined["differing"] == 0
    assert read_table(spark, order_payments.output, settings).count() > 0
