"""The data-quality suites of the joins' outputs and of the commerce stream's tables.

The same kind of suites as lakehouse.quality.suites (which dispatches to these by name), for
tables derived from accepted rows: a breach here is a pipeline bug, not a bad record, so most
checks FAIL the run. What each check protects is said next to it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from lakehouse.core.commerce import ORDER_EVENT_TYPES, STATUS_NONE
from lakehouse.core.lazy import LazyModule
from lakehouse.quality.suites import (
    KAFKA_TYPES,
    Action,
    Check,
    Suite,
    _no_rows,
    _non_negative,
    _not_null,
    _suite,
    _types,
    _unique,
)
from lakehouse.transforms.as_of import MATCHED, STATUSES

if TYPE_CHECKING:
    import great_expectations.expectations as gxe
else:
    gxe = LazyModule("great_expectations.expectations")


def _no_groups(name: str, query: str, description: str) -> Check:
    """A FAIL check whose unexpected rows are a query's result (groups, pairs of rows)."""

    return Check(
        name,
        gxe.UnexpectedRowsExpectation(unexpected_rows_query=query, description=description),
        Action.FAIL,
    )


def events_enriched_suite() -> Suite:
    """Events with their dimensions as of their event time; a later row corrects an earlier."""

    statuses = list(STATUSES)
    return _suite(
        "silver.events_enriched",
        _types(
            Action.FAIL,
            event_id="StringType",
            event_time="TimestampType",
            list_price="DecimalType",
            enriched_batch="LongType",
            corrected="BooleanType",
        ),
        _not_null(Action.FAIL, "event_id", "event_type", "event_time", "enriched_batch"),
        _not_null(Action.FAIL, "product_match", "user_match", "corrected"),
        [
            Check(
                f"{side}_match_known",
                gxe.ExpectColumnValuesToBeInSet(column=f"{side}_match", value_set=statuses),
                Action.FAIL,
            )
            for side in ("product", "user")
        ],
        _no_rows(
            "matched_names_its_version",
            f"(product_match = '{MATCHED}' AND product_version_lsn IS NULL) "
            f"OR (user_match = '{MATCHED}' AND user_version_lsn IS NULL)",
            Action.FAIL,
            "A matched dimension names the version (LSN) it was joined with.",
        ),
        _no_rows(
            "unmatched_has_no_columns",
            f"(product_match <> '{MATCHED}' AND (category IS NOT NULL OR list_price IS NOT NULL))"
            f" OR (user_match <> '{MATCHED}' AND (segment IS NOT NULL OR country IS NOT NULL))",
            Action.FAIL,
            "A dimension no version held at the event's time leaves its columns null.",
        ),
        # Twice in one micro-batch: a retried batch wrote its rows again.
        _no_groups(
            "one_row_per_event_and_batch",
            "SELECT event_id, enriched_batch FROM {batch} GROUP BY event_id, enriched_batch "
            "HAVING count(*) > 1",
            "An event is enriched at most once per micro-batch.",
        ),
        # A correction replaces an earlier row of the same event; alone it replaced nothing.
        _no_groups(
            "corrections_follow_a_first_row",
            "SELECT event_id FROM {batch} GROUP BY event_id "
            "HAVING min(CASE WHEN corrected THEN enriched_batch END) <= "
            "coalesce(min(CASE WHEN NOT corrected THEN enriched_batch END), 9223372036854775807)",
            "Every event's first row is its enrichment, not a correction.",
        ),
        Check(
            "list_price_not_negative",
            gxe.ExpectColumnValuesToBeBetween(column="list_price", min_value=0),
            Action.WARN,  # the shop's own data; the join reports it as it was
        ),
    )


def _revenue_rows() -> list[Check]:
    """What every row of the revenue view holds, in the speed and the batch layer alike."""
    return [
        *_types(
            Action.FAIL,
            window_start="TimestampType",
            window_end="TimestampType",
            purchases="LongType",
            revenue="DecimalType",
        ),
        *_not_null(
            Action.FAIL, "window_start", "window_end", "segment", "category", "purchases", "revenue"
        ),
        _no_rows(
            "window_is_an_hour",
            "window_end <> window_start + INTERVAL 1 HOUR",
            Action.FAIL,
            "Each row's window is the hour it starts.",
        ),
    ]


def revenue_by_segment_suite(name: str = "speed.revenue_by_segment") -> Suite:
    """Hourly purchases and revenue per segment and category, as partial rows per batch."""

    return _suite(
        name,
        _revenue_rows(),
        _not_null(Action.FAIL, "batch_id"),
        # Corrections take contributions out, so one partial row may be negative; their sum
        # per key is a count and a sum of non-negative amounts.
        _no_groups(
            "summed_partials_not_negative",
            "SELECT window_start, segment, category FROM {batch} "
            "GROUP BY window_start, segment, category "
            "HAVING sum(purchases) < 0 OR sum(revenue) < 0",
            "Purchases and revenue per key, partial rows summed, are not negative.",
        ),
    )


def batch_revenue_suite() -> Suite:
    """The batch layer's hourly purchases and revenue per segment and category: one final row
    per key, recomputed from bronze (lakehouse.joins.batch)."""

    return _suite(
        "batch.revenue_by_segment",
        _revenue_rows(),
        _no_rows(
            "purchases_counted",
            "purchases <= 0 OR revenue < 0",
            Action.FAIL,
            "A row counts at least one purchase, and revenue is a sum of non-negative amounts.",
        ),
        _no_groups(
            "one_row_per_key",
            "SELECT window_start, segment, category FROM {batch} "
            "GROUP BY window_start, segment, category HAVING count(*) > 1",
            "Each hour, segment and category has one row: a rerun replaces its interval's.",
        ),
    )


def order_events_suite() -> Suite:
    """Accepted order lifecycle events: each once, typed, of a known type."""

    return _suite(
        "silver.order_events",
        _types(
            Action.FAIL,
            event_id="StringType",
            order_id="StringType",
            amount="DecimalType",
            event_time="TimestampType",
            **KAFKA_TYPES,
        ),
        _not_null(Action.FAIL, "event_id", "order_id", "user_id", "type", "event_time"),
        Check(
            "type_known",
            gxe.ExpectColumnValuesToBeInSet(column="type", value_set=list(ORDER_EVENT_TYPES)),
            Action.FAIL,
        ),
        _no_rows(
            "placed_has_an_amount",
            "type = 'placed' AND (amount IS NULL OR amount < 0)",
            Action.FAIL,
            "A placed order carries its total, not negative.",
        ),
        _unique(Action.FAIL, "event_id"),
        _unique(Action.FAIL, "kafka_partition", "kafka_offset"),
    )


def payments_suite() -> Suite:
    """Accepted payments: each payment_id once, with its order and amount."""

    return _suite(
        "silver.payments",
        _types(
            Action.FAIL,
            payment_id="StringType",
            amount="DecimalType",
            paid_at="TimestampType",
            **KAFKA_TYPES,
        ),
        _not_null(Action.FAIL, "payment_id", "order_id", "amount", "paid_at"),
        _non_negative(Action.FAIL, "amount"),
        _unique(Action.FAIL, "payment_id"),
    )


def order_state_suite(name: str = "silver.order_state") -> Suite:
    """Each order once, in a lifecycle status folded from its placed event and those after;
    an order whose events were all refused (never placed) is kept, status `none`, so that its
    rejections are not lost."""
    placed = f"status <> '{STATUS_NONE}'"
    return _suite(
        name,
        _not_null(Action.FAIL, "order_id", "status", "events_applied", "rejected"),
        Check(
            "status_known",
            gxe.ExpectColumnValuesToBeInSet(
                column="status", value_set=[STATUS_NONE, *ORDER_EVENT_TYPES]
            ),
            Action.FAIL,
        ),
        _unique(Action.FAIL, "order_id"),
        _no_rows(
            "placed_orders_complete",
            f"{placed} AND (user_id IS NULL OR placed_at IS NULL OR last_event_id IS NULL "
            "OR events_applied < 1 OR updated_at < placed_at)",
            Action.FAIL,
            "A placed order has its user, its placed time and at least its placed event.",
        ),
        _no_rows(
            "unplaced_orders_applied_nothing",
            f"NOT ({placed}) AND (events_applied <> 0 OR rejected < 1)",
            Action.FAIL,
            "An order never placed applied no event and exists for its rejections.",
        ),
        _non_negative(Action.FAIL, "rejected"),
    )


def rejected_transitions_suite(name: str = "silver.order_transitions_rejected") -> Suite:
    """Order events the lifecycle refused: each once, with the status it met and why."""

    return _suite(
        name,
        _not_null(Action.FAIL, "event_id", "order_id", "type", "from_status", "reason"),
        _unique(Action.FAIL, "event_id"),
        _no_rows(
            "reason_not_empty",
            "trim(reason) = ''",
            Action.FAIL,
            "Every rejected transition says why.",
        ),
    )


def purchase_attribution_suite() -> Suite:
    """Purchases paired with the same user's earlier clicks on the same product."""

    return _suite(
        "silver.purchase_attribution",
        _not_null(
            Action.FAIL,
            "purchase_event_id",
            "click_event_id",
            "user_id",
            "product_id",
            "purchase_time",
            "click_time",
        ),
        # Twice: a micro-batch was committed twice, or the join met a duplicate event.
        _unique(Action.FAIL, "purchase_event_id", "click_event_id"),
        _no_rows(
            "click_before_purchase",
            "click_time > purchase_time OR seconds_before < 0 OR seconds_before <> "
            "unix_timestamp(purchase_time) - unix_timestamp(click_time)",
            Action.FAIL,
            "A click attributed to a purchase came before it, seconds_before apart.",
        ),
    )


def order_payments_suite() -> Suite:
    """Each placed order with its payments in the hour after it, or once as unpaid."""

    return _suite(
        "silver.order_payments",
        _not_null(Action.FAIL, "order_id", "placed_at", "paid"),
        _no_rows(
            "paid_means_a_payment",
            "paid <> (payment_id IS NOT NULL) OR (paid AND paid_at < placed_at)",
            Action.FAIL,
            "A paid row names a payment made after the order; an unpaid row names none.",
        ),
        _no_groups(
            "one_row_per_order_and_payment",
            "SELECT order_id, payment_id FROM {batch} GROUP BY order_id, payment_id "
            "HAVING count(*) > 1",
            "An order meets each of its payments once; an unpaid order is emitted once.",
        ),
        _no_groups(
            "unpaid_or_paid_not_both",
            "SELECT order_id FROM {batch} GROUP BY order_id "
            "HAVING max(CAST(paid AS INT)) = 1 AND min(CAST(paid AS INT)) = 0",
            "An order emitted as unpaid has no payment row, and a paid one no unpaid row.",
        ),
    )


def user_orders_suite() -> Suite:
    """Each current user once, with their orders' count and spend."""

    return _suite(
        "silver.user_orders",
        _not_null(Action.FAIL, "user_id", "orders"),
        _unique(Action.FAIL, "user_id"),
        _non_negative(Action.FAIL, "orders", "spend"),
        _no_rows(
            "no_orders_no_last_order",
            "(orders = 0) <> (last_order_at IS NULL)",
            Action.FAIL,
            "A user has a last order time exactly when they have an order.",
        ),
    )


JOIN_SUITES: dict[str, Callable[[], Suite]] = {
    "silver.events_enriched": events_enriched_suite,
    "speed.revenue_by_segment": revenue_by_segment_suite,
    "batch.revenue_by_segment": batch_revenue_suite,
    "silver.order_events": order_events_suite,
    "silver.payments": payments_suite,
    "silver.order_state": order_state_suite,
    "silver.order_transitions_rejected": rejected_transitions_suite,
    "silver.purchase_attribution": purchase_attribution_suite,
    "silver.order_payments": order_payments_suite,
    "silver.user_orders": user_orders_suite,
}
