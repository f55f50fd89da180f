"""The benchmarks' synthetic events, as Spark columns: millions are built in seconds, where
the generator (kafka-python, one record at a time) would take minutes.

Every benchmark draws the same mix from a row number `n`: 5% purchases (19.99 each), 10%
add_to_cart, the rest page views and clicks, over five pages.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import Column

PAGES = ("/", "/search", "/product", "/cart", "/checkout")
PURCHASE_AMOUNT = 19.99
MILLIS = "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'"
MICROS = "yyyy-MM-dd'T'HH:mm:ss.SSSSSS'Z'"


def event_type(n: Column) -> Column:
    from pyspark.sql import functions as F

    return (
        F.when(n % 20 == 19, "purchase")
        .when(n % 20 >= 17, "add_to_cart")
        .when(n % 2 == 0, "page_view")
        .otherwise("click")
    )


def page(n: Column) -> Column:
    from pyspark.sql import functions as F

    return F.element_at(F.array(*(F.lit(p) for p in PAGES)), (n % len(PAGES) + 1).cast("int"))


def purchase_amount(kind: Column) -> Column:
    from pyspark.sql import functions as F

    return F.when(kind == "purchase", F.lit(PURCHASE_AMOUNT))


def event_json(time_format: str = MILLIS) -> Column:
    """The Kafka value of an event from columns event_id, event_type, user_id, page and t."""
    from pyspark.sql import functions as F

    return F.to_json(
        F.struct(
            "event_id",
            "event_type",
            "user_id",
            "page",
            purchase_amount(F.col("event_type")).alias("amount"),
            F.date_format("t", time_format).alias("event_time"),
        )
    )
