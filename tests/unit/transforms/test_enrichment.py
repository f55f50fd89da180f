"""Enriched purchases and their revenue view: the totals are all the purchases', and a
dimension change that arrives after its events is corrected into exactly the view the whole
history gives."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from pyspark.sql import functions as F

from lakehouse.cdc.shop import PRODUCTS, USERS, CapturedTable
from lakehouse.core.frames import rows_frame
from lakehouse.core.times import from_micros
from lakehouse.transforms.as_of import timeline
from lakehouse.transforms.changes import history_rows
from lakehouse.transforms.enrichment import (
    PRODUCT,
    USER,
    affected_events,
    affected_of_rows,
    change_starts,
    change_starts_of_rows,
    combine_revenue,
    correction_partials,
    enrich_by_timelines,
    enrich_events,
    enrich_of_rows,
    net_of_rows,
    net_rows,
    partials_of,
    revenue_by_segment,
    revenue_of_rows,
)

pytestmark = pytest.mark.slow  # make test-fast leaves it out (docs/testing.md)

T0 = datetime(2026, 11, 25, 10, 0, tzinfo=UTC)
EVENTS = (
    "event_id string, event_type string, user_id string, product_id string, "
    "amount decimal(18,2), event_time timestamp"
)
CHANGE = (
    "op string, lsn bigint, kafka_offset bigint, commit_time timestamp, tx_id bigint, "
    "deletes boolean"
)


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


class Shop:
    """Row changes of the shop's users and products, in commit order (one LSN each)."""

    def __init__(self) -> None:
        self.changes: dict[str, list[tuple]] = {"users": [], "products": []}
        self.lsn = 0

    def _add(self, captured: CapturedTable, values: tuple, minute: float, deletes: bool) -> None:
        self.lsn += 10
        op = "d" if deletes else "u"
        change = (*values, at(minute), op, self.lsn, self.lsn, at(minute), self.lsn, deletes)
        self.changes[captured.name].append(change)

    def user(self, user_id: str, segment: str, minute: float, deletes: bool = False) -> None:
        self._add(USERS, (user_id, segment, "DE"), minute, deletes)

    def product(self, product_id: str, category: str, price: str, minute: float, deletes=False):
        self._add(PRODUCTS, (product_id, "Mug", category, Decimal(price)), minute, deletes)

    def history(self, spark, captured: CapturedTable, upto: int | None = None):
        """The history of the changes up to LSN `upto` (all by default)."""
        rows = [c for c in self.changes[captured.name] if upto is None or c[-4] <= upto]
        typed = rows_frame(spark, rows, f"{captured.ddl}, {CHANGE}")
        return history_rows(typed, captured)


def events(spark, rows: list[tuple]) -> object:
    """(event_id, event_type, user_id, product_id, amount, minute)."""
    return rows_frame(
        spark, [(*r[:4], None if r[4] is None else Decimal(r[4]), at(r[5])) for r in rows], EVENTS
    )


def view(frame) -> dict[tuple, tuple]:
    return {
        (r["window_start"].hour, r["segment"], r["category"]): (r["purchases"], r["revenue"])
        for r in frame.collect()
    }


def test_every_purchase_counts_under_its_dimensions_or_the_reason_it_has_none(spark) -> None:
    shop = Shop()
    shop.user("u1", "new", 0)
    shop.user("u1", "gold", 30)
    shop.product("p1", "kitchen", "10", 0)
    shop.product("p1", "kitchen", "10", 50, deletes=True)
    clicks = events(
        spark,
        [
            ("e1", "purchase", "u1", "p1", "5.00", 10),  # new, kitchen
            ("e2", "purchase", "u1", "p1", "7.00", 40),  # gold, kitchen
            ("e3", "purchase", "u1", "p1", "1.50", 55),  # gold, the product deleted
            ("e4", "purchase", "u9", "p1", "2.00", 20),  # a user never captured
            ("e5", "purchase", "u1", "p1", "3.00", -10),  # before the user's first version
            ("e6", "click", "u1", "p1", None, 10),  # not a purchase
        ],
    )
    enriched = enrich_events(clicks, shop.history(spark, USERS), shop.history(spark, PRODUCTS))
    assert enriched.count() == 6
    [e1] = enriched.where("event_id = 'e1'").collect()
    assert (e1["segment"], e1["category"], e1["list_price"]) == ("new", "kitchen", Decimal("10"))
    assert view(revenue_by_segment(enriched)) == {
        (10, "new", "kitchen"): (1, Decimal("5.00")),
        (10, "gold", "kitchen"): (1, Decimal("7.00")),
        (10, "gold", "(deleted)"): (1, Decimal("1.50")),
        (10, "(unknown)", "kitchen"): (1, Decimal("2.00")),
        (9, "(not_yet)", "(not_yet)"): (1, Decimal("3.00")),
    }


def as_pylist(table) -> list[tuple]:
    """The table's rows, sorted with nulls last."""
    rows = [tuple(r.values()) for r in table.to_pylist()]
    return sorted(rows, key=lambda row: tuple((v is None, 0 if v is None else v) for v in row))


@pytest.mark.parametrize("seed", range(3))
def test_the_view_summed_on_the_driver_is_the_view_spark_sums(spark, seed: int) -> None:
    """revenue_of_rows (a micro-batch's few rows, on the driver) against revenue_by_segment:
    the same rows, for every status a dimension can have, a purchase without an amount, one
    without a user or product, one at the very start of an hour and one just before the next."""
    rng = random.Random(seed)
    shop = random_shop(rng)
    shop.product("p1", "kitchen", "10", -60)
    shop.product("p1", "kitchen", "10", 230, deletes=True)
    fixed = [
        ("x1", "purchase", "u1", "p1", None, 0),
        ("x2", "purchase", None, None, "4.00", 59.999),
        ("x3", "purchase", "u9", "p1", "2.50", 235),
        ("x4", "purchase", "u1", "p1", "1.25", -45),
    ]
    clicks = random_events(spark, rng).unionByName(events(spark, fixed))
    enriched = enrich_events(clicks, shop.history(spark, USERS), shop.history(spark, PRODUCTS))
    by_spark = revenue_by_segment(enriched).toArrow()
    on_driver = revenue_of_rows(enriched.toArrow())
    assert on_driver.column_names == by_spark.column_names
    assert as_pylist(on_driver) == as_pylist(by_spark)
    labels = {r[2] for r in as_pylist(by_spark)} | {r[3] for r in as_pylist(by_spark)}
    assert {"(none)", "(unknown)", "(deleted)", "(not_yet)"} <= labels


@pytest.mark.parametrize("seed", range(3))
def test_a_correction_found_on_the_driver_is_the_one_spark_finds(spark, seed: int) -> None:
    """The driver's twins of a correction's steps (a correcting micro-batch's few rows)
    against Spark's, on a random late change: change_starts_of_rows, affected_of_rows,
    enrich_of_rows, net_of_rows and revenue_of_rows(signed) give the rows change_starts,
    affected_events, enrich_by_timelines, net_rows and partials_of give."""
    rng = random.Random(seed)
    shop = random_shop(rng)
    clicks = random_events(spark, rng).cache()
    behind = rng.randint(0, shop.lsn // 2)
    enriched_then = enrich_events(
        clicks, shop.history(spark, USERS, behind), shop.history(spark, PRODUCTS, behind)
    ).cache()
    by_spark, on_driver = [], []
    for captured, dimension in ((USERS, USER), (PRODUCTS, PRODUCT)):
        now, then = shop.history(spark, captured), shop.history(spark, captured, behind)
        starts = change_starts(now, then, dimension)
        found = change_starts_of_rows(now.toArrow(), then.toArrow(), dimension)
        assert as_pylist(found) == as_pylist(starts.toArrow())
        by_spark.append(affected_events(enriched_then, starts, dimension))
        on_driver.append(affected_of_rows(enriched_then.toArrow(), found, dimension))
        assert as_pylist(on_driver[-1]) == as_pylist(by_spark[-1].toArrow())
    before = by_spark[0].unionByName(by_spark[1]).distinct()
    timelines = [
        timeline(shop.history(spark, c), d) for c, d in ((USERS, USER), (PRODUCTS, PRODUCT))
    ]
    after = enrich_by_timelines(before.select(*clicks.columns), *timelines)
    again = enrich_of_rows(
        before.select(*clicks.columns).toArrow(), *(t.toArrow() for t in timelines)
    )
    assert again.schema == after.toArrow().schema
    assert as_pylist(again) == as_pylist(after.toArrow())
    net = net_of_rows(before.toArrow(), after.toArrow())
    assert net.num_rows > 0, "the late change re-enriches some event"
    # An event enriched alike nets to nothing, its null columns (no product) included.
    alike = enriched_then.toArrow()
    assert alike["category"].null_count > 0
    assert net_of_rows(alike, alike).num_rows == 0
    assert as_pylist(net) == as_pylist(net_rows(before, after).toArrow())
    assert as_pylist(revenue_of_rows(net, signed=True)) == as_pylist(
        partials_of(net_rows(before, after)).toArrow()
    )


def random_shop(rng: random.Random) -> Shop:
    shop = Shop()
    for n in range(rng.randint(8, 20)):
        minute = rng.uniform(-30, 240)
        if rng.random() < 0.5:
            shop.user(f"u{rng.randint(1, 3)}", rng.choice(["new", "gold", "vip"]), minute)
        else:
            deletes = rng.random() < 0.15
            product = f"p{rng.randint(1, 3)}"
            shop.product(product, rng.choice(["kitchen", "garden"]), f"{n + 1}", minute, deletes)
    return shop


def random_events(spark, rng: random.Random):
    rows = [
        (
            f"e{i}",
            rng.choice(["purchase", "purchase", "click"]),
            f"u{rng.randint(1, 4)}",
            rng.choice(["p1", "p2", "p3", "p4", None]),
            f"{rng.randint(1, 900) / 100:.2f}",
            rng.uniform(0, 240),
        )
        for i in range(60)
    ]
    return events(spark, rows)


@pytest.mark.parametrize("seed", range(3))
def test_a_late_dimension_change_is_corrected_into_the_view_of_the_whole_history(
    spark, seed: int
) -> None:
    """The events were enriched while the changelog was behind (the history of the changes
    up to a random LSN); the rest of the changes arrive; the view's partial rows with the
    correction added up equal the view of the events enriched with the whole history."""
    rng = random.Random(seed)
    shop = random_shop(rng)
    clicks = random_events(spark, rng).cache()
    behind = rng.randint(0, shop.lsn)
    users_then, products_then = (shop.history(spark, t, behind) for t in (USERS, PRODUCTS))
    users_now, products_now = (shop.history(spark, t) for t in (USERS, PRODUCTS))
    enriched_then = enrich_events(clicks, users_then, products_then)

    # Each changed key, and from when on its events may change.
    changed_users = change_starts(users_now, users_then, USER)
    changed_products = change_starts(products_now, products_then, PRODUCT)
    before = (
        affected_events(enriched_then, changed_users, USER)
        .unionByName(affected_events(enriched_then, changed_products, PRODUCT))
        .distinct()
    )
    after = enrich_events(before.select(*clicks.columns), users_now, products_now)
    corrected = revenue_by_segment(enriched_then).unionByName(correction_partials(before, after))

    judge = revenue_by_segment(enrich_events(clicks, users_now, products_now))
    assert view(combine_revenue(corrected)) == view(combine_revenue(judge))


def test_an_event_enriched_alike_needs_no_correction(spark) -> None:
    shop = Shop()
    shop.user("u1", "new", 0)
    shop.product("p1", "kitchen", "10", 0)
    clicks = events(spark, [("e1", "purchase", "u1", "p1", "5.00", 10)])
    enriched = enrich_events(clicks, shop.history(spark, USERS), shop.history(spark, PRODUCTS))
    assert correction_partials(enriched, enriched).count() == 0


def test_a_change_bears_from_where_the_history_first_differs_not_from_the_versions_start(
    spark,
) -> None:
    """u1's first version, held before, only ends at minute 30 where the new one starts:
    events before 30 keep their enrichment. p1 deleted at 50 bears from 50. u2 had no version
    at all before: its events may change at any time (they were `unknown`)."""
    shop = Shop()
    shop.user("u1", "new", 0)
    shop.product("p1", "kitchen", "10", 0)
    seen = shop.lsn
    shop.user("u1", "gold", 30)
    shop.product("p1", "kitchen", "10", 50, deletes=True)
    shop.user("u2", "new", 20)

    def starts(captured, dimension):
        now, was = shop.history(spark, captured), shop.history(spark, captured, seen)
        found = change_starts(now, was, dimension)
        found = found.select("_key", F.unix_micros("_from").alias("_from"), "_new")
        by_spark = {r["_key"]: (from_micros(r["_from"]), r["_new"]) for r in found.collect()}
        on_driver = change_starts_of_rows(now.toArrow(), was.toArrow(), dimension).to_pylist()
        assert {r["_key"]: (r["_from"], r["_new"]) for r in on_driver} == by_spark
        return by_spark

    assert starts(USERS, USER) == {"u1": (at(30), False), "u2": (at(20), True)}
    assert starts(PRODUCTS, PRODUCT) == {"p1": (at(50), False)}
