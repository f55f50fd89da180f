"""A day of events with every anomaly, streamed by the speed layer into one lakehouse, and the
same day recomputed by the batch layer in a copy of it: built once per test run for the
modules that check the batch layer, serving and reconciliation, which copy it to write.

A stream costs each of its micro-batches' commits to a dozen tables, whatever the number of
events; so one stream serves them all.
"""

from __future__ import annotations

import os
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from lakehouse.batch.recompute import Interval, recompute_interval
from lakehouse.core.config import Settings, load_settings
from lakehouse.generator.clickstream import (
    preset_config,
    produce,
)
from lakehouse.generator.ledger import read_ledger
from lakehouse.speed.outputs import SpeedOutputs
from lakehouse.speed.stream import start_query
from tests.conftest import new_topic

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

HOUR = timedelta(hours=1)
EVENTS = 4000
# Several micro-batches: events that reach a later one behind the watermark the earlier ones
# moved are set aside as late, which is what batch = speed + late is about.
OFFSETS_PER_BATCH = 1000


def environment(root: Path, topic: str) -> dict[str, str]:
    """The variables that point a job at the lakehouse in `root` (and its own state folder)."""
    return {
        "TRIBUTARY_PROFILE": "local",
        "TRIBUTARY_STATE": str(root / "state"),
        "TRIBUTARY__STORAGE__ROOT": str(root / "lake"),
        "TRIBUTARY__STORAGE__CHECKPOINTS": str(root / "checkpoints"),
        "TRIBUTARY__KAFKA__TOPIC": topic,
        "TRIBUTARY__SPEED__MAX_OFFSETS_PER_TRIGGER": str(OFFSETS_PER_BATCH),
    }


def settings_for(root: Path, topic: str) -> Settings:
    return load_settings("local", {**os.environ, **environment(root, topic)})


class Day:
    """The last 24 whole hours, streamed into tmp/streamed/lake; copies of it beside it."""

    def __init__(self, tmp: Path, topic: str, day: Interval, ledger: list[dict[str, Any]]):
        self.tmp, self.topic, self.day, self.ledger = tmp, topic, day, ledger
        self.streamed = settings_for(tmp / "streamed", topic)

    def copy(self, name: str, source: str = "streamed") -> Settings:
        """A copy of the lakehouse `source` (what the stream wrote, and no batch results yet,
        by default; or another copy's name) as tmp/<name>/lake."""
        shutil.copytree(self.tmp / source / "lake", self.tmp / name / "lake")
        return self.settings(name)

    def settings(self, name: str) -> Settings:
        return settings_for(self.tmp / name, self.topic)

    def environment(self, name: str) -> dict[str, str]:
        return environment(self.tmp / name, self.topic)

    def hour(self, k: int) -> Interval:
        return Interval(self.day.start + k * HOUR, self.day.start + (k + 1) * HOUR)

    def span(self, first: int, end: int) -> Interval:
        return Interval(self.day.start + first * HOUR, self.day.start + end * HOUR)


_built: dict[str, Any] = {}


def streamed_day(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Day:
    """The day, streamed (once per test run)."""
    if "day" not in _built:
        _built["day"] = _stream_a_day(spark, tmp_path_factory)
    day: Day = _built["day"]
    return day


def recomputed_day(spark: SparkSession, day: Day) -> Settings:
    """The copy "daily": the whole day recomputed in one batch run (once per test run)."""
    if "daily" not in _built:
        settings = day.copy("daily")
        recompute_interval(spark, settings, day.day, "daily")
        _built["daily"] = settings
    daily: Settings = _built["daily"]
    return daily


def _stream_a_day(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Day:
    tmp = tmp_path_factory.mktemp("day")
    topic = new_topic("day")
    this_hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    d = Day(tmp, topic, Interval(this_hour - 24 * HOUR, this_hour), [])
    # 25 hours of event time ending now; late events trail by 15 min .. 3 h. The newest
    # minutes, after the day, are the speed layer's alone.
    start = this_hour - 25 * HOUR
    seconds = (datetime.now(UTC) - start).total_seconds()
    cfg = preset_config(
        "all", {}, count=EVENTS, seed=7, start=start, rate=EVENTS / seconds, users=30
    )
    produce(d.streamed, cfg, tmp / "ledger.jsonl", topic=topic)
    d.ledger = read_ledger(tmp / "ledger.jsonl")
    start_query(
        spark, d.streamed, SpeedOutputs.live(), available_now=True, topic=topic
    ).awaitTermination()
    return d
