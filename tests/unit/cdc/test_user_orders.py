"""The changelog stream's upkeep of silver.user_orders (lakehouse.cdc.user_orders): a random
(seeded) sequence of changes of users and orders, as Debezium sends them, applied in
micro-batches of random sizes; after every batch the view is the batch join of the current
tables. Orders move between users, users are deleted while they have orders and come back,
orders come before their user. A batch retried after its view MERGE failed, or retried whole
after it committed, leaves the view as its first try would have; the CDC reconciliation judges
the view equal, and finds a view row the stream got wrong."""

from __future__ import annotations

import json
import random
from collections import Counter
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pyspark.testing import assertDataFrameEqual

from lakehouse.cdc import changelog
from lakehouse.cdc.changelog import ChangelogProcessor, current_table
from lakehouse.cdc.reconcile import last_progress, reconcile_changelog, reconcile_user_orders
from lakehouse.cdc.shop import ORDERS, USERS
from lakehouse.cdc.user_orders import VIEW
from lakehouse.core.config import Settings
from lakehouse.core.delta_io import read_table, table_version
from lakehouse.core.frames import rows_frame
from lakehouse.reconcile.changelog import failures, run_rows, summary_text
from lakehouse.transforms.user_orders import user_orders
from tests.lakehouses import copied, local_lakehouse, moved_to
from tests.micro_batches import query_checkpoint

pytestmark = pytest.mark.slow  # make test-fast leaves it out (docs/testing.md)

T0 = datetime(2026, 11, 25, 10, 0, tzinfo=UTC)
KAFKA = (
    "key binary, value binary, topic string, partition int, offset long, "
    "timestamp timestamp, timestampType int"
)
# Many users beside the orders: a batch leaves most users untouched, so the user an order
# leaves is often touched by nothing else in its batch (only its `before` image names them).
USER_IDS = [f"u{i}" for i in range(1, 16)]
ORDER_IDS = [f"o{i}" for i in range(1, 11)]
STATUSES = ("placed", "paid", "shipped", "cancelled")
CHANGES = 60
BATCHES = 4
RETRIED = 2  # the batch whose view MERGE fails once


def iso(lsn: int) -> str:
    return (T0 + timedelta(seconds=lsn)).isoformat().replace("+00:00", "Z")


class Shop:
    """The shop's users and orders as PostgreSQL holds them, and the changelog records its
    changes make, in commit order: (table, key, envelope or None for a tombstone)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.users: dict[str, dict] = {}
        self.orders: dict[str, dict] = {}
        self.lsn = 0
        self.records: list[tuple[str, str, dict | None]] = []
        self.seen: Counter[str] = Counter()  # the cases the sequence went through

    def change(self, name: str, key: str, op: str, before: dict | None, after: dict | None):
        self.lsn += 10
        source = {"lsn": self.lsn, "txId": self.lsn, "ts_ms": 1764064800000 + self.lsn}
        envelope = {
            "before": before,
            "after": after,
            "op": op,
            "source": source | {"snapshot": "false"},
        }
        self.records.append((name, key, envelope))
        if op == "d":
            self.records.append((name, key, None))

    def step(self) -> None:
        rng = self.rng
        if rng.random() < 0.3:
            self.user_change(rng.choice(USER_IDS))
        else:
            self.order_change(rng.choice(ORDER_IDS))

    def user_change(self, user_id: str) -> None:
        old = self.users.get(user_id)
        if old is not None and self.rng.random() < 0.35:
            del self.users[user_id]
            self.seen["user deleted with orders"] += self.orders_of(user_id) > 0
            self.change("users", user_id, "d", old, None)
            return
        row = {
            "user_id": user_id,
            "segment": self.rng.choice(("new", "regular", "vip")),
            "country": self.rng.choice(("DE", "FR")),
            "updated_at": iso(self.lsn + 10),
        }
        self.users[user_id] = row
        if old is None:
            self.seen["user inserted with orders"] += self.orders_of(user_id) > 0
        self.change("users", user_id, "u" if old else "c", old, row)

    def order_change(self, order_id: str) -> None:
        old = self.orders.get(order_id)
        if old is not None and self.rng.random() < 0.25:
            del self.orders[order_id]
            self.change("orders", order_id, "d", old, None)
            return
        user_id = self.rng.choice(USER_IDS)
        total = None if self.rng.random() < 0.1 else f"{self.rng.randint(1, 9999) / 100:.2f}"
        row = {
            "order_id": order_id,
            "user_id": user_id,
            "status": self.rng.choice(STATUSES),
            "total": total,
            "updated_at": iso(self.lsn + 10),
        }
        self.seen["order moved"] += old is not None and old["user_id"] != user_id
        self.seen["order of no current user"] += user_id not in self.users
        self.orders[order_id] = row
        self.change("orders", order_id, "u" if old else "c", old, row)

    def orders_of(self, user_id: str) -> int:
        return sum(o["user_id"] == user_id for o in self.orders.values())


def micro_batches(spark, settings: Settings, shop: Shop, rng: random.Random):
    """The shop's records cut at random points into BATCHES micro-batches, each topic's offsets
    counted from 0 on its own partition; and each batch's (first, end) in shop.records."""
    offsets: Counter[str] = Counter()
    rows = []
    for name, key, envelope in shop.records:
        key_column = USERS.key[0] if name == "users" else ORDERS.key[0]
        value = None if envelope is None else json.dumps(envelope).encode()
        topic = settings.cdc.topic(name)
        rows.append((json.dumps({key_column: key}).encode(), value, topic, 0, offsets[name], T0, 0))
        offsets[name] += 1
    cuts = sorted(rng.sample(range(1, len(rows)), BATCHES - 1))
    bounds = list(zip([0, *cuts], [*cuts, len(rows)], strict=True))
    return [rows_frame(spark, rows[a:b], KAFKA) for a, b in bounds], bounds


def users_only_left(shop: Shop, bounds: list[tuple[int, int]]) -> int:
    """Current users that a later batch changes only by an order leaving them: named by no
    user change and no order's `after` image of the batch (the first batch builds the view
    whole, so it is not counted)."""
    found = 0
    for first, end in bounds[1:]:
        named, left = set(), set()
        for name, key, envelope in shop.records[first:end]:
            if envelope is None:
                continue
            if name == "users":
                named.add(key)
                continue
            named |= {envelope["after"]["user_id"]} if envelope["after"] else set()
            left |= {envelope["before"]["user_id"]} if envelope["before"] else set()
        live: set[str] = set()
        for name, key, envelope in shop.records[:end]:
            if name == "users" and envelope is not None:
                (live.discard if envelope["op"] == "d" else live.add)(key)
        found += len((left - named) & live)
    return found


def join_of_current(spark, settings: Settings):
    users = read_table(spark, current_table(USERS), settings)
    orders = read_table(spark, current_table(ORDERS), settings)
    return user_orders(users, orders)


@dataclass(frozen=True)
class Streamed:
    folder: Path  # nothing writes to it after the fixture: copy it
    settings: Settings
    views: list  # the view's rows after each batch
    joins: list  # the batch join of the current tables after each batch
    seen: Counter[str]
    users_only_left: int
    versions_before_retry: int | None
    versions_after_retry: int | None


@pytest.fixture(scope="module")
def streamed(spark, tmp_path_factory) -> Streamed:
    folder = tmp_path_factory.mktemp("user_orders")
    settings = local_lakehouse(folder)
    cdc = settings.cdc.model_copy(update={"tables": ("users", "orders")})
    settings = settings.model_copy(update={"cdc": cdc})
    rng = random.Random(32)
    shop = Shop(rng)
    for _ in range(CHANGES):
        shop.step()
    batches, bounds = micro_batches(spark, settings, shop, rng)
    checkpoint = str(query_checkpoint(folder / "query", "user-orders-1"))
    stream = ChangelogProcessor(settings, checkpoint)
    views, joins = [], []
    for batch_id, batch in enumerate(batches):
        if batch_id == RETRIED:
            # The batch's current tables are merged, then its view MERGE fails: Spark runs the
            # batch again (a new processor, as after a restart).
            refresh = changelog.refresh_user_orders

            def failing(*args, **kwargs):
                raise RuntimeError("the view's MERGE failed")

            changelog.refresh_user_orders = failing
            try:
                with pytest.raises(RuntimeError):
                    stream(batch, batch_id)
            finally:
                changelog.refresh_user_orders = refresh
            stream = ChangelogProcessor(settings, checkpoint)
        stream(batch, batch_id)
        views.append(read_table(spark, VIEW, settings).collect())
        joins.append(join_of_current(spark, settings).collect())
    before = table_version(spark, VIEW, settings)
    # The last batch handed over again after a restart: it is written already.
    ChangelogProcessor(settings, checkpoint)(batches[-1], len(batches) - 1)
    after = table_version(spark, VIEW, settings)
    left = users_only_left(shop, bounds)
    return Streamed(folder, settings, views, joins, shop.seen, left, before, after)


def test_the_sequence_goes_through_every_case(streamed: Streamed) -> None:
    cases = ("order moved", "user deleted with orders", "user inserted with orders")
    assert all(streamed.seen[c] for c in (*cases, "order of no current user")), streamed.seen
    assert streamed.users_only_left > 0, "a user only an order's before image names"


def test_after_every_batch_the_view_is_the_batch_join_of_the_current_tables(
    streamed: Streamed,
) -> None:
    def by_user(rows: list) -> list:
        return sorted(rows, key=lambda r: r["user_id"])

    for batch_id, (view, join) in enumerate(zip(streamed.views, streamed.joins, strict=True)):
        assert by_user(view) == by_user(join), f"after batch {batch_id}"
    last = streamed.views[-1]
    assert any(r["orders"] > 0 for r in last) and any(r["orders"] == 0 for r in last)


def test_a_batch_retried_after_it_committed_writes_nothing(spark, streamed: Streamed) -> None:
    assert streamed.versions_after_retry == streamed.versions_before_retry
    assertDataFrameEqual(
        read_table(spark, VIEW, streamed.settings), join_of_current(spark, streamed.settings)
    )


def test_the_reconciliation_judges_the_view_and_finds_a_row_the_stream_got_wrong(
    spark, streamed: Streamed, tmp_path: Path
) -> None:
    reconciled = reconcile_changelog(spark, streamed.settings)
    [view] = reconciled.views
    assert reconciled.equal and view.equal
    assert view.comparison.compared == len(streamed.views[-1]) > 0

    settings = moved_to(streamed.settings, copied(streamed.folder, tmp_path / "copy"))
    from delta.tables import DeltaTable

    wrong = sorted(streamed.views[-1], key=lambda r: r["user_id"])[0]
    DeltaTable.forPath(spark, VIEW.path(settings)).update(
        f"user_id = '{wrong['user_id']}'", {"orders": "orders + 1"}
    )
    view = reconcile_user_orders(spark, settings, last_progress(spark, settings)["offsets"])
    assert not view.equal and view.comparison.differing == 1
    example = (
        f"user_id={wrong['user_id']}: orders {wrong['orders']} in the recompute, "
        f"{wrong['orders'] + 1} in the stream"
    )
    assert view.comparison.examples == [example]
    # Told and recorded as the captured tables' kinds are (lakehouse.reconcile.changelog).
    told = replace(reconciled, views=[view])
    users = len(streamed.views[-1])
    assert failures(told) == [f"user_orders: 1 of {users} users differ (first: {example})"]
    lines = summary_text(told, "manual__1").splitlines()
    assert ["user_orders", str(users), str(users - 1), "1", "0"] in [ln.split() for ln in lines]
    assert f"  user_orders {example}" in lines
    [row] = [
        r for r in run_rows(spark, told, "manual__1", T0).collect() if r["view"] == "user_orders"
    ]
    assert (row["verdict"], row["unexplained"], row["first_windows"]) == ("failed", 1, [example])
