"""The change generator's plan: deterministic per seed, over the keys the click events name,
every change valid against the shop it is applied to (replayed here on a dict), each key's
business clock moving forward, and bad configs refused with what to change."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from lakehouse.generator.clickstream import GeneratorConfig, generate_events, generate_records
from lakehouse.generator.shop_apply import lsn_number
from lakehouse.generator.shop_changes import (
    DELETE,
    INSERT,
    KEY_UPDATE,
    NEXT_STATUS,
    OPS,
    SEED_PRODUCT,
    SEED_USER,
    STATUS_CHANGES,
    TABLE_COLUMNS,
    TABLE_KEYS,
    UPDATE,
    Change,
    ChangeConfig,
    Shop,
    empty_shop,
    final_rows,
    json_row,
    plan_changes,
    planned_count,
    product_key,
    user_key,
)

START = datetime(2026, 3, 1, tzinfo=UTC)


def config(**fields: Any) -> ChangeConfig:
    values: dict[str, Any] = {"count": 3_000, "seed": 11, "start": START, "key_updates": 0.05}
    return ChangeConfig(**(values | fields))


def replay(changes: Sequence[Change], shop: Shop | None = None) -> Shop:
    """Apply the changes to a dict as PostgreSQL would, failing on any change it would refuse
    (a duplicate key, no row to update or delete) or that breaks the shop's rules."""
    rows = shop or empty_shop()
    for change in changes:
        table = rows[change.table]
        if change.op == INSERT:
            assert change.key not in table, f"{change}: the key exists"
        if change.op in (UPDATE, DELETE):
            assert change.key in table, f"{change}: no row"
        if change.op == KEY_UPDATE:
            assert change.old_key in table and change.key not in table, change
            del table[change.old_key]
        if change.op == UPDATE and change.table == "orders":
            before, after = table[change.key]["status"], change.row and change.row["status"]
            assert before == after or after in NEXT_STATUS.get(before, ()), change
        if change.row is None:
            del table[change.key]
        else:
            assert tuple(change.row) == TABLE_COLUMNS[change.table], change
            assert change.row[TABLE_KEYS[change.table]] == change.key, change
            if change.table == "orders" and change.op == INSERT:
                assert change.row["user_id"] in rows["users"], f"{change}: no such user"
            table[change.key] = change.row
    return rows


def test_the_same_seed_plans_the_same_changes_and_another_seed_others() -> None:
    first = list(plan_changes(config()))
    assert first == list(plan_changes(config()))
    assert first != list(plan_changes(config(seed=12)))
    assert len(first) == planned_count(config()) == 50 + 200 + 3_000


def test_the_seed_rows_are_the_users_and_products_the_click_events_name() -> None:
    changes = list(plan_changes(config()))
    seeded = {(c.table, c.key) for c in changes[:250]}
    assert {c.change for c in changes[:250]} == {SEED_USER, SEED_PRODUCT}
    assert seeded == {("users", f"u{n:04d}") for n in range(1, 51)} | {
        ("products", f"p{n:03d}") for n in range(1, 201)
    }
    # The demo's clean events (50 users, 200 products by default) and the anomalous stream
    # with the shop sized as it is.
    events = [event for _, event in generate_events(2_000, seed=3, start=START)]
    assert {("users", e["user_id"]) for e in events} <= seeded
    assert {("products", e["product_id"]) for e in events if e["product_id"]} <= seeded
    wide = list(plan_changes(config(users=200, products=500, count=1)))
    wide_keys = {(c.table, c.key) for c in wide}
    stream = GeneratorConfig(count=5_000, seed=4, start=START, users=200)
    for record in generate_records(stream):
        assert ("users", record.key) in wide_keys
    assert user_key(7) == "u0007" and product_key(42) == "p042"


def test_every_change_is_one_postgresql_takes_and_the_final_rows_are_the_ledgers() -> None:
    changes = list(plan_changes(config()))
    shop = replay(changes)
    ledger = [c.ledger_entry() for c in changes]
    expected = {(t, key): json_row(row) for t, rows in shop.items() for key, row in rows.items()}
    live = {where: row for where, row in final_rows(ledger).items() if row is not None}
    assert live == expected
    assert all(row["updated_at"].endswith("Z") for row in live.values())


def test_every_op_and_every_kind_of_change_appears() -> None:
    changes = list(plan_changes(config()))
    assert set(Counter(c.op for c in changes)) == set(OPS)
    kinds = {c.change for c in changes}
    assert {"segment_change", "country_change", "price_change", "total_change"} <= kinds
    assert set(STATUS_CHANGES.values()) <= kinds
    assert {"new_user", "new_order", "delist_product", "relist_product", "delete_order"} <= kinds
    assert "rekey_order" in kinds
    assert {c.table for c in changes if c.op == DELETE} == {"products", "orders"}


def test_no_key_updates_unless_asked() -> None:
    changes = plan_changes(config(key_updates=0.0))
    assert KEY_UPDATE not in {c.op for c in changes}


def test_each_keys_business_clock_only_moves_forward() -> None:
    clocks: dict[tuple[str, str], list[datetime]] = {}
    previous = START
    for change in plan_changes(config()):
        if change.row is not None:
            stamp = change.row["updated_at"]
            assert stamp.tzinfo is not None and stamp >= START
            assert stamp > previous  # one shop clock: each change after the one before
            previous = stamp
            clocks.setdefault((change.table, change.key), []).append(stamp)
    assert all(times == sorted(set(times)) for times in clocks.values())


def test_a_second_run_continues_the_rows_the_first_left() -> None:
    first = list(plan_changes(config(start=START + timedelta(days=1))))
    shop = replay(first)
    # An earlier start than the rows' clocks: each key still moves forward past its own.
    second_cfg = config(seed=99, start=START)
    delisted = [n for n in range(1, 201) if product_key(n) not in shop["products"]]
    assert delisted  # the first run delisted some of the seeded products: seeded again
    assert planned_count(second_cfg, shop) == 3_000 + len(delisted)
    last = {(t, k): row["updated_at"] for t, rows in shop.items() for k, row in rows.items()}
    second = list(plan_changes(second_cfg, shop))
    replay(second, {t: dict(rows) for t, rows in shop.items()})
    for change in second:
        if change.row is not None and (change.table, change.key) in last:
            assert change.row["updated_at"] > last[(change.table, change.key)]
    assert all(c.change != SEED_USER for c in second)  # the users are there already


def test_a_key_prefix_is_on_every_key_the_plan_touches() -> None:
    for change in plan_changes(config(key_prefix="t42-", count=500)):
        assert change.key.startswith("t42-"), change
        assert change.old_key is None or change.old_key.startswith("t42-")
        if change.table == "orders" and change.row:
            assert change.row["user_id"].startswith("t42-u")


def test_half_the_catalogue_stays_listed() -> None:
    listed: set[str] = set()
    for change in plan_changes(config(deletes=5.0, count=2_000)):
        if change.table == "products":
            (listed.discard if change.op == DELETE else listed.add)(change.key)
        if change.op == DELETE and change.table == "products":
            assert len(listed) >= 100


def test_a_ledger_folds_into_rows_with_deleted_and_moved_keys_gone() -> None:
    entries: list[dict[str, Any]] = [
        {"table": "orders", "op": "insert", "key": "o1", "row": {"status": "placed"}},
        {"table": "orders", "op": "key_update", "key": "o2", "old_key": "o1", "row": {"x": 1}},
        {"table": "users", "op": "insert", "key": "u1", "row": {"segment": "new"}},
        {"table": "users", "op": "delete", "key": "u1", "row": None},
    ]
    assert final_rows(entries) == {
        ("orders", "o1"): None,
        ("orders", "o2"): {"x": 1},
        ("users", "u1"): None,
    }


def test_an_lsn_reads_as_debeziums_number() -> None:
    assert lsn_number("0/16B3748") == 0x16B3748
    assert lsn_number("16/B374D848") == (0x16 << 32) + 0xB374D848


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"count": 0}, "count must be from 1"),
        ({"users": 0}, "users must be from 1 to 9999"),
        ({"products": 1_000}, "products must be from 1 to 999"),
        ({"deletes": -0.1}, "the share of deletes must be a finite number >= 0"),
        ({"updates": float("nan")}, "the share of updates must be a finite number >= 0"),
        (
            {"inserts": 0, "updates": 0, "deletes": 0, "key_updates": 0},
            "at least one of the op shares",
        ),
        ({"key_prefix": "Test run"}, "key_prefix must be up to 20 of a-z"),
        ({"step": timedelta(0)}, "step must be > 0"),
        ({"start": datetime(2026, 3, 1)}, "start must be timezone-aware"),
        ({"start": datetime(2999, 12, 31, 23, tzinfo=UTC)}, "would run past the times"),
    ],
)
def test_a_bad_config_is_refused_saying_what_to_change(
    fields: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match="invalid change generator config: .*" + message):
        replace(config(), **fields)
