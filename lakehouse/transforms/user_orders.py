"""The table-table view silver.user_orders: each current user with their current orders.

- `user_orders` is the view's definition, the batch join of silver.users_current and
  silver.orders_current: one row per current user (a deleted user has none) with
    orders         how many rows of orders_current carry the user's id (cancelled ones too)
    spend          the sum of `total` over those whose status is not 'cancelled' (a null
                   status is not 'cancelled'; a null total adds nothing); 0 with none
    last_order_at  the newest `updated_at` among the user's orders (null with none)
    users_lsn      the LSN of the change the user's current row came from
    orders_lsn     the highest LSN among the user's current orders (null with none): how
                   fresh the orders side is; a deleted order leaves no trace in it
  An order whose user_id has no current user (not inserted yet, deleted, or null) is in no
  row: it counts once its user is current again.
- `user_orders_of` is the same join for some users only: the view is a per-user aggregate, so
  the rows of those users are the join of their rows on both sides.
- `affected_users` are the users whose view row a batch of changes can change: a user whose
  row changed, and for an order both the user it belonged to (its `before` image) and the one
  it belongs to now (its `after` image), so an order moved from one user to another changes
  both. The shop's tables have REPLICA IDENTITY FULL (infra/postgres/shop.sql): an update's and
  a delete's `before` image is the whole old row, user_id included.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

USER_COLUMNS = ("user_id", "segment", "country")
VIEW_COLUMNS = (
    *USER_COLUMNS,
    "orders",
    "spend",
    "last_order_at",
    "users_lsn",
    "orders_lsn",
)
CANCELLED = "cancelled"
SPEND_TYPE = "decimal(38,2)"


def user_orders(users_current: DataFrame, orders_current: DataFrame) -> DataFrame:
    """silver.users_current and silver.orders_current -> silver.user_orders (the module's
    rules), in VIEW_COLUMNS."""
    counted = ~F.col("status").eqNullSafe(F.lit(CANCELLED))
    per_user = (
        orders_current.where(F.col("user_id").isNotNull())
        .groupBy("user_id")
        .agg(
            F.count(F.lit(1)).alias("orders"),
            F.sum(F.when(counted, F.col("total"))).alias("spend"),
            F.max("updated_at").alias("last_order_at"),
            F.max("lsn").alias("orders_lsn"),
        )
    )
    users = users_current.select(*USER_COLUMNS, F.col("lsn").alias("users_lsn"))
    joined = users.join(per_user, "user_id", "left")
    return joined.select(
        *USER_COLUMNS,
        F.coalesce("orders", F.lit(0)).cast("bigint").alias("orders"),
        F.coalesce(F.col("spend").cast(SPEND_TYPE), F.lit(0).cast(SPEND_TYPE)).alias("spend"),
        "last_order_at",
        F.col("users_lsn").cast("bigint").alias("users_lsn"),
        F.col("orders_lsn").cast("bigint").alias("orders_lsn"),
    )


def user_orders_of(
    users_current: DataFrame, orders_current: DataFrame, user_ids: DataFrame
) -> DataFrame:
    """The view's rows of the users in `user_ids` (a column user_id, small): both sides
    narrowed to those users first, then joined as user_orders joins."""
    ids = F.broadcast(user_ids.select("user_id").distinct())
    users = users_current.join(ids, "user_id", "left_semi")
    orders = orders_current.join(ids, "user_id", "left_semi")
    return user_orders(users, orders)


def affected_users(users_changes: DataFrame, orders_changes: DataFrame) -> DataFrame:
    """Bronze changes of users and of orders (bronze.<table>_changes rows: key_json, before,
    after as JSON text) -> the distinct ids (column user_id) of the users whose view row they
    can change. Tombstones carry no image: the delete before them names the row."""

    def ids_in(changes: DataFrame, images: tuple[str, ...]) -> DataFrame:
        found = [F.get_json_object(F.col(image), "$.user_id") for image in images]
        return changes.select(F.explode(F.array(*found)).alias("user_id"))

    users = ids_in(users_changes, ("key_json", "before", "after"))
    orders = ids_in(orders_changes, ("before", "after"))
    both = users.unionByName(orders)
    return both.where(F.col("user_id").isNotNull()).distinct()
