"""The data-quality suites, as code: one function per table or view, reviewed like code.

A suite is a list of checks; a check is one Great Expectations expectation plus what a
broken expectation means for the run:

    FAIL        the table is wrong (a pipeline bug): the run fails
    WARN        suspicious but usable: the run goes on, the result says so
    QUARANTINE  the offending rows are routed to dq.quality_quarantine with "dq:<check>"

QUARANTINE only fits expectations that judge one row at a time, so that "the offending rows"
can be selected with a filter; `unexpected_rows` is that filter, derived from the
expectation itself, so the suite and the routing cannot disagree.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from lakehouse.core import events as contract
from lakehouse.core.lazy import LazyModule
from lakehouse.transforms.views import view

if TYPE_CHECKING:
    import great_expectations as gx
    import great_expectations.expectations as gxe
    from great_expectations.expectations import row_conditions
else:
    # Great Expectations takes seconds to import: it is imported when a suite is first built,
    # not with this module (every test worker imports every test module, and so this one).
    gx = LazyModule("great_expectations")
    gxe = LazyModule("great_expectations.expectations")
    row_conditions = LazyModule("great_expectations.expectations.row_conditions")


class Action(StrEnum):
    FAIL = "fail"
    WARN = "warn"
    QUARANTINE = "quarantine"


@dataclass(frozen=True)
class Check:
    name: str  # snake_case, unique in its suite; the quarantine reason is "dq:<name>"
    expectation: gxe.Expectation
    action: Action

    def __post_init__(self) -> None:
        if self.action is Action.QUARANTINE:
            unexpected_rows(self.expectation)  # raises now, not on the first bad row

    @property
    def reason(self) -> str:
        return f"dq:{self.name}"


@dataclass(frozen=True)
class Suite:
    name: str  # the table (or view) it is written for
    checks: tuple[Check, ...]

    def __post_init__(self) -> None:
        names = [c.name for c in self.checks]
        if len(names) != len(set(names)):
            raise ValueError(f"suite {self.name}: check names must be unique: {names}")

    def check(self, name: str) -> Check:
        return next(c for c in self.checks if c.name == name)

    def expectation_suite(self) -> gx.ExpectationSuite:
        """A fresh GX suite; each expectation carries its check's name and action in `meta`
        (how results are matched back, and what Data Docs show next to each rule)."""
        suite = gx.ExpectationSuite(name=self.name)
        for c in self.checks:
            meta = {**(c.expectation.meta or {}), "check": c.name, "action": c.action.value}
            notes = f"{c.name}: when broken, {c.action.value}"
            suite.add_expectation(
                c.expectation.copy(deep=True, update={"meta": meta, "notes": notes, "id": None})
            )
        return suite


@dataclass(frozen=True)
class EventTimeBounds:
    """The event times a silver snapshot may hold, e.g. from the retention start to the end
    of the run's data interval plus the future tolerance. Given by the caller: tasks are
    keyed by their data interval, never by now()."""

    earliest: datetime
    latest: datetime

    def __post_init__(self) -> None:
        if self.earliest.tzinfo is None or self.latest.tzinfo is None:
            raise ValueError("EventTimeBounds need timezone-aware datetimes")
        if self.earliest > self.latest:
            raise ValueError(f"EventTimeBounds: {self.earliest} is after {self.latest}")


# --- the rows an expectation refuses, as a Spark SQL predicate --------------------------

# GX's row-condition operators (by name) as Spark SQL.
_SQL_OPERATORS = {
    "EQUAL": "=",
    "NOT_EQUAL": "<>",
    "LESS_THAN": "<",
    "LESS_THAN_OR_EQUAL": "<=",
    "GREATER_THAN": ">",
    "GREATER_THAN_OR_EQUAL": ">=",
}


def _literal(value: Any) -> str:
    if isinstance(value, datetime):
        return f"TIMESTAMP '{value.isoformat()}'"
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    if isinstance(value, int | float | Decimal) and not isinstance(value, bool):
        return str(value)
    raise TypeError(f"no SQL literal for {value!r} in a quarantine check")


def _ident(column: str) -> str:
    return f"`{column.replace('`', '``')}`"


def _row_condition(condition: Any) -> str | None:
    if condition is None:
        return None
    if isinstance(condition, row_conditions.NullityCondition):
        return f"{_ident(condition.column.name)} IS {'' if condition.is_null else 'NOT '}NULL"
    if isinstance(condition, row_conditions.ComparisonCondition):
        column = _ident(condition.column.name)
        operator = row_conditions.Operator(condition.operator).name
        if operator in ("IN", "NOT_IN"):
            values = ", ".join(_literal(v) for v in condition.parameter)
            negate = "NOT " if operator == "NOT_IN" else ""
            return f"{column} {negate}IN ({values})"
        return f"{column} {_SQL_OPERATORS[operator]} {_literal(condition.parameter)}"
    raise TypeError(f"row condition {condition!r} is not supported for quarantine checks")


def unexpected_rows(expectation: gxe.Expectation) -> str:
    """The rows `expectation` counts as unexpected, as a Spark SQL predicate.

    Only the row-level expectations quarantine checks use are supported; like GX, the
    value checks ignore nulls (a null is the not-null check's business).
    """
    e = expectation
    column = _ident(getattr(e, "column", ""))
    if isinstance(e, gxe.ExpectColumnValuesToNotBeNull):
        bad = f"{column} IS NULL"
    elif isinstance(e, gxe.ExpectColumnValuesToBeInSet):
        bad = f"{column} NOT IN ({', '.join(_literal(v) for v in e.value_set)})"
    elif isinstance(e, gxe.ExpectColumnValuesToBeBetween):
        out = []
        if e.min_value is not None:
            out.append(f"{column} {'<=' if e.strict_min else '<'} {_literal(e.min_value)}")
        if e.max_value is not None:
            out.append(f"{column} {'>=' if e.strict_max else '>'} {_literal(e.max_value)}")
        bad = f"{column} IS NOT NULL AND ({' OR '.join(out)})"
    else:
        raise TypeError(
            f"{type(e).__name__} cannot route rows to quarantine: use FAIL or WARN, or a "
            "row-level expectation (not null, in set, between)"
        )
    where = _row_condition(e.row_condition)
    # A null comparison is "not unexpected" in GX; coalesce keeps it out of the routed rows.
    return f"coalesce(({where}) AND ({bad}), false)" if where else f"coalesce({bad}, false)"


# --- building blocks ---------------------------------------------------------------------


def _types(action: Action, **columns: str) -> list[Check]:
    # GX compares the Spark type's class (DecimalType, not decimal(18,2)): a schema drift in
    # precision would pass; the writers' schemas pin it.
    return [
        Check(
            f"{c}_is_{t.removesuffix('Type').lower()}",
            gxe.ExpectColumnValuesToBeOfType(column=c, type_=t),
            action,
        )
        for c, t in columns.items()
    ]


def _not_null(action: Action, *columns: str) -> list[Check]:
    return [
        Check(f"{c}_not_null", gxe.ExpectColumnValuesToNotBeNull(column=c), action) for c in columns
    ]


def _non_negative(action: Action, *columns: str) -> list[Check]:
    return [
        Check(f"{c}_not_negative", gxe.ExpectColumnValuesToBeBetween(column=c, min_value=0), action)
        for c in columns
    ]


def _unique(action: Action, *columns: str) -> Check:
    expectation: gxe.Expectation = (
        gxe.ExpectColumnValuesToBeUnique(column=columns[0])
        if len(columns) == 1
        else gxe.ExpectCompoundColumnsToBeUnique(column_list=list(columns))
    )
    return Check(f"{'_'.join(columns)}_unique", expectation, action)


def _no_rows(name: str, where: str, action: Action, description: str) -> Check:
    query = f"SELECT * FROM {{batch}} WHERE {where}"
    return Check(
        name,
        gxe.UnexpectedRowsExpectation(unexpected_rows_query=query, description=description),
        action,
    )


def _suite(name: str, *checks: Check | Iterable[Check]) -> Suite:
    flat: list[Check] = []
    for c in checks:
        flat.extend([c] if isinstance(c, Check) else c)
    return Suite(name, tuple(flat))


KAFKA_TYPES = {"kafka_partition": "IntegerType", "kafka_offset": "LongType"}
VIEW_WINDOW_TYPES = {"window_start": "TimestampType", "window_end": "TimestampType"}

# --- the suites ---------------------------------------------------------------------------


def bronze_events_raw_suite() -> Suite:
    """Every Kafka record once, with its coordinates: the master dataset's promise."""
    return _suite(
        "bronze.events_raw",
        _types(
            Action.FAIL,
            topic="StringType",
            partition="IntegerType",
            offset="LongType",
            kafka_timestamp="TimestampType",
        ),
        _not_null(Action.FAIL, "topic", "partition", "offset", "kafka_timestamp"),
        _non_negative(Action.FAIL, "partition", "offset"),
        # A coordinate seen twice means a micro-batch was committed twice (exactly-once broke).
        _unique(Action.FAIL, "topic", "partition", "offset"),
        # Producers key by user_id so one user's events stay ordered; a missing key loses
        # that order but no data.
        _not_null(Action.WARN, "key"),
    )


def silver_events_suite(bounds: EventTimeBounds) -> Suite:
    """Accepted events: typed, keyed, unique by event_id, values within the contract."""
    return _suite(
        "silver.events",
        _types(
            Action.FAIL,
            event_id="StringType",
            event_type="StringType",
            user_id="StringType",
            page="StringType",
            amount="DecimalType",
            event_time="TimestampType",
            event_date="DateType",
            **KAFKA_TYPES,
        ),
        # Row-level breaches are single bad records: route them out, keep the rest.
        _not_null(Action.QUARANTINE, *contract.REQUIRED_FIELDS),
        Check(
            "event_type_known",
            gxe.ExpectColumnValuesToBeInSet(
                column="event_type", value_set=list(contract.EVENT_TYPES)
            ),
            Action.QUARANTINE,
        ),
        Check(
            "purchase_amount_not_null",
            gxe.ExpectColumnValuesToNotBeNull(
                column="amount", row_condition=row_conditions.Column("event_type") == "purchase"
            ),
            Action.QUARANTINE,
        ),
        # Only purchases carry an amount (others are null), so this is "purchases >= 0".
        _non_negative(Action.QUARANTINE, "amount"),
        Check(
            "event_time_within_bounds",
            gxe.ExpectColumnValuesToBeBetween(
                column="event_time", min_value=bounds.earliest, max_value=bounds.latest
            ),
            Action.QUARANTINE,
        ),
        # Set-level breaches mean deduplication or exactly-once broke: no row is "the bad one".
        _unique(Action.FAIL, "event_id"),
        _not_null(Action.FAIL, "kafka_partition", "kafka_offset"),
        Check(
            "sent_after_event_time",
            gxe.ExpectColumnPairValuesAToBeGreaterThanB(
                column_A="sent_at",
                column_B="event_time",
                or_equal=True,
                ignore_row_if="either_value_is_missing",
            ),
            Action.WARN,  # a producer's clock is off; its event_time may be too
        ),
    )


def quarantine_suite() -> Suite:
    """Every quarantined record says why, and is quarantined once."""
    return _suite(
        "bronze.quarantine",
        _not_null(Action.FAIL, "reason", "topic", "kafka_partition", "kafka_offset"),
        _no_rows(
            "reason_not_empty",
            "trim(reason) = '' OR reasons IS NULL OR size(reasons) = 0",
            Action.FAIL,
            "Every quarantined record has at least one reason.",
        ),
        _unique(Action.FAIL, "topic", "kafka_partition", "kafka_offset"),
        _not_null(Action.WARN, "quarantined_at"),
    )


def _window_checks(name: str, length_minutes: int) -> list[Check]:
    keys = view(name).keys  # the views registry owns the keys the MERGEs rely on
    return [
        *_types(Action.FAIL, **VIEW_WINDOW_TYPES, events="LongType"),
        *_not_null(Action.FAIL, *keys),
        _unique(Action.FAIL, *keys),
        _no_rows(
            "window_bounds_consistent",
            f"window_end IS NULL OR window_end <> window_start + INTERVAL {length_minutes} "
            "MINUTES OR window_start <> date_trunc('MINUTE', window_start)",
            Action.FAIL,
            f"window_end = window_start + {length_minutes} min; windows start on a minute.",
        ),
    ]


def event_counts_suite(name: str = "speed.event_counts_1m") -> Suite:
    """1-minute tumbling windows per event_type (speed, batch or a replay's copy)."""
    return _suite(
        name,
        _window_checks("event_counts_1m", 1),
        _types(Action.FAIL, amount_sum="DecimalType"),
        _non_negative(Action.FAIL, "events", "amount_sum"),
    )


def active_users_suite(name: str = "speed.active_users_10m") -> Suite:
    """10-minute windows sliding by a minute, per page: a set of users and a count."""
    return _suite(
        name,
        _window_checks("active_users_10m", 10),
        _types(Action.FAIL, active_users="IntegerType"),
        _non_negative(Action.FAIL, "events", "active_users"),
        _no_rows(
            "active_users_consistent",
            "active_users <> size(users) OR active_users > events",
            Action.FAIL,
            "active_users is the size of the user set, and never above the event count.",
        ),
    )


def user_sessions_suite(name: str = "speed.user_sessions") -> Suite:
    """Per-user sessions closed by inactivity."""
    return _suite(
        name,
        _types(
            Action.FAIL,
            session_start="TimestampType",
            session_end="TimestampType",
            events="LongType",
            revenue="DecimalType",
            duration_seconds="LongType",
        ),
        _not_null(Action.FAIL, *view("user_sessions").keys, "session_end"),
        _unique(Action.FAIL, *view("user_sessions").keys),
        _non_negative(Action.FAIL, "events", "revenue"),
        Check(
            "session_end_not_before_start",
            gxe.ExpectColumnPairValuesAToBeGreaterThanB(
                column_A="session_end", column_B="session_start", or_equal=True
            ),
            Action.FAIL,
        ),
        _no_rows(
            "duration_matches_bounds",
            "duration_seconds IS NULL OR "
            "duration_seconds <> unix_timestamp(session_end) - unix_timestamp(session_start)",
            Action.FAIL,
            "duration_seconds = session_end - session_start.",
        ),
        # A session ends after 30 minutes of silence; one lasting a day is a bot or a stuck
        # clock: worth a look, not wrong.
        Check(
            "duration_plausible",
            gxe.ExpectColumnValuesToBeBetween(column="duration_seconds", max_value=24 * 3600),
            Action.WARN,
        ),
    )


VIEW_SUITES = {
    "event_counts_1m": event_counts_suite,
    "active_users_10m": active_users_suite,
    "user_sessions": user_sessions_suite,
}


def suite_for(table_name: str, bounds: EventTimeBounds | None = None) -> Suite:
    """The suite of a table by its registry name; views by their name in any stage
    (speed.*, batch.*, replay_<v>.*, serving.*)."""
    if table_name == "bronze.events_raw":
        return bronze_events_raw_suite()
    if table_name == "bronze.quarantine":
        return quarantine_suite()
    if table_name == "silver.events":
        if bounds is None:
            raise ValueError("silver.events needs EventTimeBounds (the run's data interval)")
        return silver_events_suite(bounds)
    from lakehouse.quality.join_suites import JOIN_SUITES

    if table_name in JOIN_SUITES:
        return JOIN_SUITES[table_name]()
    view = table_name.rpartition(".")[2]
    if view in VIEW_SUITES:
        return VIEW_SUITES[view](table_name)
    raise KeyError(f"no data-quality suite for {table_name!r}")
