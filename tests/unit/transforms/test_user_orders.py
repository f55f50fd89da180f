"""The table-table view's definition (lakehouse.transforms.user_orders) on tiny current tables:
cancelled orders count but do not spend, a user with no orders has a row of zeros, orders of an
unknown or deleted user are in no row, a moved order counts for its new user; and the users a
batch of changes affects, both sides of a moved order included."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from pyspark.testing import assertDataFrameEqual

from lakehouse.core.frames import rows_frame
from lakehouse.core.tables import table
from lakehouse.transforms.user_orders import affected_users, user_orders, user_orders_of

T0 = datetime(2026, 11, 25, 10, 0, tzinfo=UTC)
USERS = table("silver.users_current").schema
ORDERS = table("silver.orders_current").schema
VIEW = table("silver.user_orders").schema
CHANGES = "key_json string, before string, after string"


def at(minute: int) -> datetime:
    return T0 + timedelta(minutes=minute)


def user(user_id: str, segment: str, lsn: int) -> tuple:
    return (user_id, segment, "DE", at(0), lsn, lsn, at(0))


def order(order_id: str, user_id: str | None, status: str | None, total: str | None, lsn: int):
    amount = None if total is None else Decimal(total)
    return (order_id, user_id, status, amount, at(lsn), lsn, lsn, at(lsn))


def test_each_current_user_counts_all_their_orders_and_spends_what_is_not_cancelled(
    spark,
) -> None:
    users = rows_frame(spark, [user("u1", "vip", 10), user("u2", "new", 20)], USERS)
    orders = rows_frame(
        spark,
        [
            order("o1", "u1", "paid", "10.50", 30),
            order("o2", "u1", "cancelled", "99.00", 40),  # counted, not spent
            order("o3", "u1", None, "1.25", 35),  # no status is not cancelled
            order("o4", "u1", "paid", None, 36),  # no total adds nothing
            order("o5", "u9", "paid", "5.00", 50),  # no such user: in no row
            order("o6", None, "paid", "5.00", 60),  # no user at all
        ],
        ORDERS,
    )
    view = user_orders(users, orders)
    expected = [
        ("u1", "vip", "DE", 4, Decimal("11.75"), at(40), 10, 40),
        ("u2", "new", "DE", 0, Decimal("0.00"), None, 20, None),  # no orders: zeros, nulls
    ]
    assertDataFrameEqual(view, rows_frame(spark, expected, VIEW))
    declared = rows_frame(spark, [], VIEW).schema
    assert [(f.name, f.dataType) for f in view.schema] == [(f.name, f.dataType) for f in declared]


def test_a_deleted_user_has_no_row_and_a_moved_order_counts_for_its_new_user(spark) -> None:
    # u2 was deleted (no current row) while o1 was theirs; o2 moved from u2 to u1.
    users = rows_frame(spark, [user("u1", "vip", 10)], USERS)
    orders = rows_frame(
        spark,
        [order("o1", "u2", "paid", "3.00", 30), order("o2", "u1", "paid", "4.00", 50)],
        ORDERS,
    )
    expected = [("u1", "vip", "DE", 1, Decimal("4.00"), at(50), 10, 50)]
    assertDataFrameEqual(user_orders(users, orders), rows_frame(spark, expected, VIEW))


def test_the_rows_of_some_users_are_their_rows_of_the_whole_join(spark) -> None:
    users = rows_frame(spark, [user(f"u{i}", "new", i) for i in range(1, 5)], USERS)
    orders = rows_frame(
        spark,
        [order(f"o{i}", f"u{i % 5}", "paid", f"{i}.00", 10 + i) for i in range(12)],
        ORDERS,
    )
    ids = rows_frame(spark, [("u2",), ("u4",), ("u7",)], "user_id string")
    whole = user_orders(users, orders).where("user_id IN ('u2', 'u4')")
    assertDataFrameEqual(user_orders_of(users, orders, ids), whole)


def test_a_batch_affects_changed_users_and_both_users_of_a_moved_order(spark) -> None:
    def image(**row: str) -> str:
        return json.dumps(row)

    users_changes = rows_frame(
        spark,
        [
            (image(user_id="u1"), None, image(user_id="u1", segment="vip")),  # insert
            (image(user_id="u2"), image(user_id="u2", segment="new"), None),  # delete
            (image(user_id="u3"), None, None),  # a tombstone
        ],
        CHANGES,
    )
    orders_changes = rows_frame(
        spark,
        [
            (image(order_id="o1"), image(order_id="o1", user_id="u4"), image(user_id="u5")),
            (image(order_id="o2"), image(order_id="o2", user_id="u6"), None),  # delete
            (image(order_id="o3"), None, image(order_id="o3", user_id="u1")),
            (image(order_id="o4"), None, None),  # a tombstone names no user
        ],
        CHANGES,
    )
    found = sorted(r["user_id"] for r in affected_users(users_changes, orders_changes).collect())
    assert found == ["u1", "u2", "u3", "u4", "u5", "u6"]
