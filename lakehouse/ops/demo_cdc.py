"""The demo's change data capture part: the shop's users and products the click events name
(with a few changes to them over the demo's hour, for the join part to meet), then one UPDATE
of a user in PostgreSQL, followed through Debezium's topic and the changelog stream to
silver.users_current and silver.users_history.

The connector is registered if missing; the changelog stream runs `availableNow` here, or,
when it is already running (the cdc DAG keeps it up), the demo waits for it to read the
change. Any service missing is reported in one line, never raised: the rest of the demo
stands on its own.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from lakehouse.core.config import Settings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEMO_USER = "u0001"
SEGMENTS = ("new", "casual", "regular", "loyal", "vip")
WAIT_SECONDS = 120.0
# The shop's business clock starts before the demo's events (the last hour) and reaches into
# it: the rows the click events name exist when they happen, and some change meanwhile.
SHOP_CHANGES = 60
SHOP_CLOCK_START = timedelta(hours=2)
SHOP_CLOCK_STEP = timedelta(seconds=5)


@dataclass(frozen=True)
class CdcReport:
    failed: str | None  # why the part could not run (one line), or None
    update: str = ""  # what was changed
    current: dict[str, Any] | None = None  # the user's row in silver.users_current
    history: tuple[dict[str, Any], ...] = ()  # its versions, oldest first

    def lines(self) -> list[str]:
        """The report as the demo prints it."""
        if self.failed is not None:
            return [f"==> change data capture: not shown: {self.failed}"]
        row = self.current
        shown = "none"
        if row:
            shown = f"segment {row['segment']}, country {row['country']}, lsn {row['lsn']}"
        out = [
            f"==> change data capture: {self.update}",
            f"    silver.users_current: {shown}",
            f"    silver.users_history: {len(self.history)} versions",
        ]
        for v in self.history:
            until = f"{v['valid_to']:%Y-%m-%d %H:%M:%S}" if v["valid_to"] else "now"
            out.append(f"      {v['valid_from']:%Y-%m-%d %H:%M:%S} → {until:19}  {v['segment']}")
        return out


def run_cdc_demo(spark: SparkSession, settings: Settings, say: Callable[[str], None]) -> CdcReport:
    from lakehouse.cdc.capture import ensure_changelog_topics, ensure_connector
    from lakehouse.cdc.connector import CdcError
    from lakehouse.core.kafka_io import KafkaUnavailableError
    from lakehouse.core.kafka_offsets import end_offsets
    from lakehouse.generator.shop_apply import ChangeApplyError

    try:
        say("==> change data capture: the connector")
        ensure_connector(settings.cdc)
        ensure_changelog_topics(settings)
        say(f"==> the shop: {seed_shop(settings)}")
        topic = settings.cdc.topic("users")
        before = end_offsets(settings, topic)
        update, segment = update_user(settings)
        say(f"==> {update}; waiting for Debezium to publish it to {topic!r}")
        # The update's own record: Debezium may still be publishing the seed's changes, so a
        # topic that grew does not yet hold it.
        _wait(
            lambda: _published(settings, topic, before, DEMO_USER, segment),
            f"the change in {topic}",
        )
        apply_changes(spark, settings, say)
    except (CdcError, ChangeApplyError, KafkaUnavailableError, TimeoutError) as err:
        return CdcReport(failed=str(err))
    current, history = user_rows(spark, settings, DEMO_USER)
    return CdcReport(None, update, current, history)


def seed_shop(settings: Settings) -> str:
    """The users and products the click events name, inserted where the shop lacks them, then
    SHOP_CHANGES inserts and updates (no deletes) on the business clock; what was done."""
    import random

    from lakehouse.core.paths import state_dir
    from lakehouse.generator.clickstream import PRODUCTS, GeneratorConfig
    from lakehouse.generator.shop_apply import apply_changes
    from lakehouse.generator.shop_changes import ChangeConfig

    now = datetime.now(UTC)
    cfg = ChangeConfig(
        count=SHOP_CHANGES,
        seed=random.SystemRandom().randrange(1, 10**6),
        start=now - SHOP_CLOCK_START,
        users=GeneratorConfig.users,
        products=PRODUCTS,
        deletes=0.0,
        step=SHOP_CLOCK_STEP,
    )
    ledger = state_dir() / "ledgers" / f"demo-shop-{now:%Y%m%dT%H%M%S}.jsonl"
    done = apply_changes(settings.cdc, cfg, ledger, per_transaction=50)
    return (
        f"{done['applied']} changes committed to PostgreSQL, {done['seeded']} of them the users "
        f"and products the events name (ledger {ledger})"
    )


def update_user(settings: Settings) -> tuple[str, str]:
    """Give the demo user the next segment (the user first inserted if the shop has none);
    the statement, and the segment it set."""
    from lakehouse.cdc.database import connect

    with connect(settings.cdc) as conn:
        conn.execute(
            "INSERT INTO users (user_id, segment, country, updated_at) "
            "VALUES (%s, 'new', 'DE', now()) ON CONFLICT DO NOTHING",
            (DEMO_USER,),
        )
        row = conn.execute("SELECT segment FROM users WHERE user_id = %s", (DEMO_USER,))
        was = str(row.fetchone()[0])  # type: ignore[index]
        now = SEGMENTS[(SEGMENTS.index(was) + 1) % len(SEGMENTS)] if was in SEGMENTS else "new"
        conn.execute(
            "UPDATE users SET segment = %s, updated_at = clock_timestamp() WHERE user_id = %s",
            (now, DEMO_USER),
        )
    return f"UPDATE users SET segment = '{now}' WHERE user_id = '{DEMO_USER}' (was '{was}')", now


def apply_changes(spark: SparkSession, settings: Settings, say: Callable[[str], None]) -> None:
    """Run the changelog stream over what the topics hold; or wait for the running one."""
    from lakehouse.cdc.stream import run_changelog
    from lakehouse.core.locks import WriterBusyError
    from lakehouse.core.paths import cdc_stop_file

    try:
        say("==> running the changelog stream until it has read the topics")
        run_changelog(settings, cdc_stop_file(), True, say)
    except WriterBusyError:
        say("==> the changelog stream is already running; waiting for it to read the change")
        _wait(lambda: _changelog_caught_up(settings), "the changelog stream to read the change")


def user_rows(
    spark: SparkSession, settings: Settings, user_id: str
) -> tuple[dict[str, Any] | None, tuple[dict[str, Any], ...]]:
    from pyspark.sql import functions as F

    from lakehouse.core.delta_io import read_table
    from lakehouse.core.tables import table

    def rows(name: str) -> list[dict[str, Any]]:
        found = read_table(spark, table(name), settings).where(F.col("user_id") == user_id)
        order = "valid_from" if "history" in name else "lsn"
        return [r.asDict() for r in found.orderBy(order).collect()]

    current = rows("silver.users_current")
    return (current[-1] if current else None), tuple(rows("silver.users_history"))


def _changelog_caught_up(settings: Settings) -> bool:
    from lakehouse.cdc.changelog import PROGRESS
    from lakehouse.cdc.supervisor import changelog_lag
    from lakehouse.speed.progress import latest_progress

    rows = latest_progress(settings, 50, PROGRESS, map_columns=("offsets", "applied"))
    lag = changelog_lag(settings, rows, complete=len(rows) < 50)
    return not any(n for key, n in lag.items() if key.startswith(settings.cdc.topic("users")))


def _published(
    settings: Settings, topic: str, since: dict[int, int], user_id: str, segment: str
) -> bool:
    """Whether `topic` holds, past the offsets `since`, a change that gives `user_id` the
    segment `segment`."""
    import json

    from kafka import KafkaConsumer, TopicPartition

    from lakehouse.core.kafka_io import connect

    consumer = connect(settings, KafkaConsumer, enable_auto_commit=False)
    try:
        partitions = [TopicPartition(topic, p) for p in since]
        consumer.assign(partitions)
        for tp in partitions:
            consumer.seek(tp, since[tp.partition])
        ends = consumer.end_offsets(partitions)
        deadline = time.monotonic() + 30
        while any(consumer.position(tp) < ends[tp] for tp in partitions):
            if time.monotonic() > deadline:
                return False
            for records in consumer.poll(500).values():
                for record in records:
                    change = json.loads(record.value) if record.value else {}
                    after = change.get("after") or {}
                    if after.get("user_id") == user_id and after.get("segment") == segment:
                        return True
        return False
    finally:
        consumer.close()


def _wait(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {WAIT_SECONDS:.0f} s waiting for {what}")
        time.sleep(1)
