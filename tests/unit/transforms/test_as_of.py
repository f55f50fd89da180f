"""As-of joins: an event takes the dimension version valid at its own time, or a status that
says why there was none; every event exactly once, whatever the batches."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest

from lakehouse.cdc.shop import PRODUCTS, USERS
from lakehouse.core.frames import rows_frame
from lakehouse.core.tables import table
from lakehouse.transforms.as_of import (
    DELETED,
    MATCHED,
    NO_KEY,
    NOT_YET,
    UNKNOWN,
    Dimension,
    as_of_join,
    join_timeline,
    join_timeline_of_rows,
    timeline,
)

T0 = datetime(2026, 11, 25, 10, 0, tzinfo=UTC)
EVENTS = (
    "event_id string, event_type string, user_id string, product_id string, event_time timestamp"
)
PRODUCT = Dimension(PRODUCTS, "product_id", {"price": "price", "category": "category"}, "product")
USER = Dimension(USERS, "user_id", {"segment": "user_segment"}, "user")


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def product_version(
    product_id: str, price: str, valid: tuple[float, float | None], lsn: int, deleted: bool = False
) -> dict[str, Any]:
    start, end = valid
    return {
        "product_id": product_id,
        "name": "Mug",
        "category": "kitchen",
        "price": Decimal(price),
        "updated_at": at(start),
        "valid_from": at(start),
        "valid_to": None if end is None else at(end),
        "is_current": end is None,
        "deleted": deleted,
        "lsn": lsn,
        "ended_lsn": None if end is None else lsn + 1,
    }


def events(spark, rows: list[tuple[str, str | None, float]]):
    """(event_id, product_id, minute) -> events of user u1."""
    return rows_frame(
        spark, [(e, "purchase", "u1", p, at(minute)) for e, p, minute in rows], EVENTS
    )


def products(spark, versions: list[dict[str, Any]]):
    return rows_frame(spark, versions, table("silver.products_history").schema)


# p1: 10 from 10:00, 12 from 11:00, deleted at 12:00, inserted again at 15 from 13:00.
P1 = [
    product_version("p1", "10", (0, 60), 100),
    product_version("p1", "12", (60, 120), 200, deleted=True),
    product_version("p1", "15", (180, None), 400),
]


@pytest.mark.parametrize(
    ("product_id", "minute", "status", "price"),
    [
        ("p1", -60, NOT_YET, None),
        ("p1", 0, MATCHED, "10"),  # a version holds from its own start
        ("p1", 59.99, MATCHED, "10"),
        ("p1", 60, MATCHED, "12"),  # and no longer at the next one's
        ("p1", 150, DELETED, None),
        ("p1", 240, MATCHED, "15"),  # inserted again: the new row
        ("p2", 0, UNKNOWN, None),
        (None, 0, NO_KEY, None),
    ],
)
def test_an_event_takes_the_version_valid_at_its_time_or_says_why_none(
    spark, product_id: str | None, minute: float, status: str, price: str | None
) -> None:
    joined = as_of_join(events(spark, [("e1", product_id, minute)]), products(spark, P1), PRODUCT)
    [row] = joined.collect()
    assert row["product_match"] == status
    assert row["price"] == (None if price is None else Decimal(price))
    assert (row["category"] is None) == (price is None)
    lsns = {"10": 100, "12": 200, "15": 400}
    assert row["product_version_lsn"] == (None if price is None else lsns[price])
    assert (row["event_id"], row["product_id"], row["event_type"]) == ("e1", product_id, "purchase")


def test_with_a_clock_that_went_backwards_the_version_committed_last_wins(spark) -> None:
    """Versions opened at 10:00, 12:00 and then 11:00 (the business clock set back): at 11:30
    the first and the third both hold; the third was committed last."""
    history = [
        product_version("p3", "1", (0, 120), 10),
        product_version("p3", "2", (120, 60), 20),
        product_version("p3", "3", (60, None), 30),
    ]
    joined = as_of_join(events(spark, [("e1", "p3", 90)]), products(spark, history), PRODUCT)
    [row] = joined.collect()
    assert (row["price"], row["product_version_lsn"]) == (Decimal("3"), 30)


def test_every_event_comes_out_once_whatever_the_batches(spark) -> None:
    rows = [(f"e{i}", ("p1", "p2", None)[i % 3], i * 7.5) for i in range(40)]
    history = products(spark, P1)
    whole = as_of_join(events(spark, rows), history, PRODUCT)
    cut = [as_of_join(events(spark, part), history, PRODUCT) for part in (rows[:13], rows[13:])]
    pieces = cut[0].unionByName(cut[1])
    assert whole.count() == len(rows)
    assert sorted(whole.collect()) == sorted(pieces.collect())


def test_two_dimensions_join_one_after_the_other(spark) -> None:
    users = rows_frame(
        spark,
        [
            {
                "user_id": "u1",
                "segment": segment,
                "country": "DE",
                "updated_at": at(start),
                "valid_from": at(start),
                "valid_to": None if end is None else at(end),
                "is_current": end is None,
                "deleted": False,
                "lsn": lsn,
                "ended_lsn": None,
            }
            for segment, start, end, lsn in (("new", -600, 30, 1), ("gold", 30, None, 2))
        ],
        table("silver.users_history").schema,
    )
    both = (
        as_of_join(
            events(spark, [("e1", "p1", 10), ("e2", "p1", 70)]), products(spark, P1), PRODUCT
        )
        .transform(as_of_join, users, USER)
        .orderBy("event_id")
        .collect()
    )
    assert [(r["price"], r["user_segment"], r["user_match"]) for r in both] == [
        (Decimal("10"), "new", MATCHED),
        (Decimal("12"), "gold", MATCHED),
    ]


def test_a_dimension_must_name_columns_it_has() -> None:
    with pytest.raises(ValueError, match=r"products has no columns \['colour'\]"):
        Dimension(PRODUCTS, "product_id", {"colour": "colour"}, "product")


def expected_match(versions: list[dict[str, Any]], t: datetime) -> tuple[str, int | None]:
    """The rules of lakehouse.transforms.as_of, instant by instant: (status, version LSN)."""
    if not versions:
        return UNKNOWN, None
    holding = [
        v for v in versions if v["valid_from"] <= t and (v["valid_to"] is None or t < v["valid_to"])
    ]
    if holding:
        return MATCHED, max(v["lsn"] for v in holding)
    return (NOT_YET if t < min(v["valid_from"] for v in versions) else DELETED), None


def random_case(
    seed: int,
) -> tuple[list[tuple[str, str | None, float]], list[dict[str, Any]], dict[str, list[Any]]]:
    """Random histories (gaps, deletes, overlapping versions from a clock set back) and events
    at random instants, many of them on a version's bounds: (events, history, history by key)."""
    import random

    rng = random.Random(seed)
    history: list[dict[str, Any]] = []
    keyed: dict[str, list[Any]] = {}
    for k in range(6):
        product_id = f"p{k}"
        keyed[product_id] = []
        for n in range(rng.randint(1, 5)):
            start = rng.choice(range(0, 300, 15))
            end = rng.choice([None, start + rng.choice([15, 30, 90]), start - 30])
            version = product_version(product_id, str(n + 1), (start, end), k * 100 + n)
            history.append(version)
            keyed[product_id].append(version)
    instants = [m for v in history for m in (v["valid_from"], v["valid_to"]) if m is not None]
    instants += [at(rng.uniform(-60, 420)) for _ in range(60)]
    rows = [
        (f"e{i}", rng.choice([*keyed, "unknown", None]), (t - T0).total_seconds() / 60)
        for i, t in enumerate(instants)
    ]
    return rows, history, keyed


@pytest.mark.parametrize("seed", [32, 4, 5, 2026])
def test_any_history_gives_each_event_the_version_the_rules_give(spark, seed: int) -> None:
    """The join (each key's timeline, built once) agrees with the rules applied to each event
    alone, once per event (the seeds after the first hold versions that end before they
    start, before their key's first start)."""
    rows, history, keyed = random_case(seed)
    joined = as_of_join(events(spark, rows), products(spark, history), PRODUCT).collect()
    assert len(joined) == len(rows)
    got = {r["event_id"]: (r["product_match"], r["product_version_lsn"]) for r in joined}
    for event_id, product_id, minute in rows:
        if product_id is None:
            want: tuple[str, int | None] = (NO_KEY, None)
        else:
            want = expected_match(keyed.get(product_id, []), at(minute))
        assert got[event_id] == want, (event_id, product_id, minute)


@pytest.mark.parametrize("seed", [32, 7, 2026])
def test_the_driver_s_join_of_a_timeline_is_spark_s(spark, seed: int) -> None:
    """join_timeline_of_rows gives join_timeline's rows, column for column, in the events'
    order; no events give none."""
    rows, history, _ = random_case(seed)
    frame = events(spark, rows)
    segments = timeline(products(spark, history), PRODUCT)
    want = join_timeline(frame, segments, PRODUCT).toArrow()
    got = join_timeline_of_rows(frame.toArrow(), segments.toArrow(), PRODUCT)
    assert got.schema == want.schema
    assert got["event_id"].to_pylist() == [r[0] for r in rows]
    assert sorted(got.to_pylist(), key=str) == sorted(want.to_pylist(), key=str)
    none = join_timeline_of_rows(frame.limit(0).toArrow(), segments.toArrow(), PRODUCT)
    assert none.num_rows == 0
    assert none.schema == got.schema
