"""The speed layer against the real broker, checked record by record against the generator's
ledger, with every kind of anomaly switched on."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from lakehouse.core.config import Settings
from lakehouse.core.delta_io import read_table
from lakehouse.generator.clickstream import (
    preset_config,
    produce,
)
from lakehouse.generator.ledger import read_ledger
from lakehouse.speed.outputs import SpeedOutputs
from lakehouse.speed.stream import start_query
from tests.conftest import new_topic
from tests.integration import speed_checks as expect

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

OUT = SpeedOutputs.live()


def speed_settings(base: Settings, topic: str, **speed: Any) -> Settings:
    return base.model_copy(
        update={
            "kafka": base.kafka.model_copy(update={"topic": topic}),
            "speed": base.speed.model_copy(update={"max_offsets_per_trigger": 500, **speed}),
        }
    )


def generate(settings: Settings, tmp: Path, count: int, seed: int) -> list[dict[str, Any]]:
    # Event time runs from 2 h ago at ~1 event/s; late events trail by 15 min .. 3 h.
    cfg = preset_config(
        "all",
        {},
        count=count,
        seed=seed,
        start=datetime.now(UTC) - timedelta(hours=2),
        rate=1.5,
        users=40,
    )
    produce(settings, cfg, tmp / "ledger.jsonl", topic=settings.kafka.topic)
    return read_ledger(tmp / "ledger.jsonl")


def load(spark: SparkSession, settings: Settings, name: str) -> DataFrame:
    """A table of the stream's as readers read it (the views' partial rows combined)."""
    return read_table(spark, getattr(OUT, name), settings)


@pytest.fixture(scope="module")
def speed_run(
    spark: SparkSession, kafka_up: str, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Settings, list[dict[str, Any]]]:
    """One generator run with every anomaly, streamed until caught up in three micro-batches
    (the later ones meet the watermark the earlier ones moved: some events are late)."""
    import os

    from lakehouse.core.config import load_settings

    tmp = tmp_path_factory.mktemp("speed")
    env = {
        **os.environ,
        "TRIBUTARY__STORAGE__ROOT": str(tmp / "lake"),
        "TRIBUTARY__STORAGE__CHECKPOINTS": str(tmp / "checkpoints"),
    }
    env.pop("TRIBUTARY_PROFILE", None)
    settings = speed_settings(load_settings("local", env), new_topic("speed"))
    ledger = generate(settings, tmp, count=1500, seed=41)
    start_query(
        spark, settings, OUT, available_now=True, topic=settings.kafka.topic
    ).awaitTermination()
    return settings, ledger


def test_every_record_is_accounted_for(spark: SparkSession, speed_run) -> None:
    settings, ledger = speed_run
    progress = load(spark, settings, "progress").toPandas()
    consumed = int(progress["input_rows"].sum())
    silver = load(spark, settings, "silver").count()
    quarantined = load(spark, settings, "quarantine").count()
    duplicates = int(progress["duplicates"].sum())
    # A conflicting duplicate is a duplicate, and quarantined to show what it said.
    conflicting = int(progress["conflicting_duplicates"].sum())
    assert conflicting == sum(e["kind"] == "redelivery" for e in ledger) > 0
    assert consumed == len(ledger) == load(spark, settings, "raw").count()
    assert consumed == silver + quarantined + duplicates - conflicting
    assert (
        progress["input_rows"]
        == progress["quarantined"] + progress["duplicates"] + progress["new_events"]
    ).all(), "each batch balances on its own"
    assert len(progress) >= 3, "the run must span several micro-batches"
    assert (progress["total_lag"].iloc[progress["batch_id"].idxmax()]) == 0


def test_every_refused_record_is_quarantined_with_its_reasons(
    spark: SparkSession, speed_run
) -> None:
    settings, ledger = speed_run
    rows = load(spark, settings, "quarantine").collect()
    found = {(r["kafka_partition"], r["kafka_offset"]): r["reasons"] for r in rows}
    expected = {
        (e["partition"], e["offset"]): e["expected_reasons"]
        for e in ledger
        if e["expected"] == "quarantine"
    }
    assert {k for k in ledger[0]} >= {"partition", "offset"}
    assert found == expected
    kinds = {e["kind"] for e in ledger if e["expected"] == "quarantine"}
    assert kinds == {
        "malformed",
        "wrong_type",
        "missing_field",
        "oversized",
        "future",
        "redelivery",
        "invalid_utf8",
    }


def test_every_accepted_event_is_in_silver_once_as_first_delivered(
    spark: SparkSession, speed_run
) -> None:
    settings, ledger = speed_run
    rows = load(spark, settings, "silver").select("event_id", "kafka_partition", "kafka_offset")
    silver = rows.toPandas()
    assert silver["event_id"].is_unique
    assert set(silver.itertuples(index=False, name=None)) == {
        (e["event_id"], e["partition"], e["offset"]) for e in ledger if e["expected"] == "silver"
    }
    silver = silver["event_id"]
    duplicated = {e["event_id"] for e in ledger if e["expected"] == "duplicate"}
    assert duplicated and duplicated <= set(silver), "a duplicate's original is kept, once"


def test_windows_plus_late_events_equal_a_recomputation_from_the_ledger(
    spark: SparkSession,
    speed_run,
) -> None:
    settings, ledger = speed_run
    accepted = expect.accepted(ledger)
    late_ids = {r["event_id"] for r in load(spark, settings, "late").select("event_id").collect()}
    assert late_ids, "the anomalies must produce some late events"
    # Only what the generator made late is: the events it sent far ahead of the rest
    # (kind "ahead") moved no watermark.
    set_aside = {
        e["kind"] for e in ledger if e["expected"] == "silver" and e["event_id"] in late_ids
    }
    assert set_aside == {"late"}
    assert any(e["kind"] == "ahead" for e in ledger)
    late = accepted[accepted["event_id"].isin(late_ids)]
    on_time = accepted[~accepted["event_id"].isin(late_ids)]

    counts = {
        (pd_ts(r["window_start"]), r["event_type"]): (r["events"], expect.to_cents(r["amount_sum"]))
        for r in load(spark, settings, "counts").collect()
    }
    assert counts == expect.minute_counts(on_time)
    # batch = speed + late, from the other side: adding the late events back gives everything
    everything = expect.minute_counts(accepted)
    for key, (n, cents) in expect.minute_counts(late).items():
        speed_n, speed_cents = counts.get(key, (0, 0))
        assert (speed_n + n, speed_cents + cents) == everything[key]

    users = {
        (pd_ts(r["window_start"]), r["page"]): set(r["users"])
        for r in load(spark, settings, "active_users").collect()
    }
    assert users == expect.sliding_users(on_time)

    sessions = {
        (
            r["user_id"],
            pd_ts(r["session_start"]),
            pd_ts(r["session_end"]),
            r["events"],
            expect.to_cents(r["revenue"]),
        )
        for r in load(spark, settings, "sessions").collect()
    }
    assert sessions == expect.sessions(on_time)


def pd_ts(value: datetime):
    import pandas as pd

    return pd.Timestamp(value)
