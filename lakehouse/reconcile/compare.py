"""Compare one view as two sides computed it: one row per view key present on either side.

A side's rows may leave some accepted events out on purpose: the stream sets late events
aside, the batch has not read events that arrived after its run. Those events are given as
`Missing` per side; a difference is *explained* when adding them back makes both sides agree:

    left + compute(left missing) == right + compute(right missing)

For batch vs speed that is the lambda invariant `batch = speed + late`. Additive measures add,
the active-users sets unite, and sessions (not additive: a late event can join or split
them) are explained when the user has a missing event within the session gap of either
side's session.

Output columns: the view's keys; per metric `left_<m>`, `right_<m>`, `diff_<m>` (left -
right) and `unexplained_<m>` (what no missing event accounts for); `status` (equal,
explained, unexplained, or open: not final on both sides, not judged); `beyond_threshold`
(an unexplained difference larger than the metric's threshold) and `explanation`.

One shuffle: both sides and the missing events' rows are unioned and grouped by key, which
is as cheap as the full outer join a hand-written comparison would do.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import reduce

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from lakehouse.transforms.views import View
from lakehouse.transforms.windows import SESSION_GAP_SECONDS

EQUAL, EXPLAINED, UNEXPLAINED, OPEN = "equal", "explained", "unexplained", "open"
STATUSES = (EQUAL, EXPLAINED, UNEXPLAINED, OPEN)

Range = tuple[datetime, datetime]


# Columns of Missing.scoped: the [from, to) range of view rows an event is missing from.
ROWS_FROM, ROWS_TO = "_rows_from", "_rows_to"


@dataclass(frozen=True)
class Missing:
    """Accepted events (silver's columns) that a side's rows leave out on purpose."""

    events: DataFrame
    label: str  # how explanations name them, e.g. "late events set aside by speed"
    # The same events, each once per range of view rows it is missing from (ROWS_FROM,
    # ROWS_TO; null: all rows). None: every event is missing from every row.
    scoped: DataFrame | None = None

    def rows(self, view: View) -> DataFrame:
        """The view's rows over these events, each only where the side leaves it out."""
        if self.scoped is None:
            return view.compute(self.events)
        bounds = [F.unix_micros(ROWS_FROM), F.unix_micros(ROWS_TO)]
        ranges = self.scoped.select(*bounds).distinct().collect()
        parts = []
        for start, end in ranges:
            if start is None:
                events = self.scoped.where(F.col(ROWS_FROM).isNull())
                parts.append(view.compute(events.drop(ROWS_FROM, ROWS_TO)))
                continue
            events = self.scoped.where((bounds[0] == start) & (bounds[1] == end))
            placed = F.unix_micros(view.time_column)
            parts.append(
                view.compute(events.drop(ROWS_FROM, ROWS_TO)).where(
                    (placed >= F.lit(start)) & (placed < F.lit(end))
                )
            )
        return reduce(DataFrame.unionByName, parts, view.compute(self.events.limit(0)))


@dataclass(frozen=True)
class Rule:
    """How a view's rows are compared and their differences explained."""

    metrics: tuple[str, ...]  # compared columns, in report order
    user_set: str | None = None  # a sorted array column whose size is `active_users`
    sessions: bool = False  # not additive: explained by a nearby missing event


RULES: dict[str, Rule] = {
    "event_counts_1m": Rule(metrics=("events", "amount_sum")),
    "active_users_10m": Rule(metrics=("active_users", "events"), user_set="users"),
    "user_sessions": Rule(metrics=("events", "revenue", "duration_seconds"), sessions=True),
}


class NoRuleError(KeyError):
    def __str__(self) -> str:
        return f"no reconciliation rule for view {self.args[0]!r}: add one to RULES"


def rule_for(view: View) -> Rule:
    try:
        return RULES[view.name]
    except KeyError:
        raise NoRuleError(view.name) from None


def compare_view(
    left: DataFrame,
    right: DataFrame,
    view: View,
    thresholds: Mapping[str, float],
    *,
    left_missing: Missing | None = None,
    right_missing: Missing | None = None,
    closed: Sequence[Range] | None = None,
    left_open: Column | None = None,
    right_open: Column | None = None,
    scope: Sequence[Range] | None = None,
    names: tuple[str, str] = ("left", "right"),
) -> DataFrame:
    """Rows keyed like the view, with both sides' metrics, differences and a status.

    `closed`: the time ranges final on both sides (None: everything is); keys placed
    outside are `open`. `left_open`/`right_open`: a predicate on that side's rows for rows
    not final yet though placed in a closed range (a session still open); their keys are
    `open` too. `scope`: only keys placed in these [start, end) ranges are compared at all.
    `thresholds`: allowed unexplained absolute difference per metric (absent: exact).
    """
    rule = rule_for(view)
    keys = list(view.keys)
    carried = _carried_columns(view, rule)
    parts = {"left": left, "right": right}
    if not rule.sessions:  # sessions are explained by the events themselves, not their rows
        for side, missing in (("left_late", left_missing), ("right_late", right_missing)):
            if missing is not None:
                parts[side] = missing.rows(view)
    still_open = {"left": left_open, "right": right_open}
    in_scope = F.lit(True) if scope is None else _in_ranges(view.time_column, scope)
    if len(parts) == 2:
        # Only the two sides' rows: a full outer join is the cheapest way to pair them.
        left_rows, right_rows = (
            _side_rows(parts[s].where(in_scope), s, keys, carried, still_open[s])
            for s in ("left", "right")
        )
        grouped = _joined(left_rows, right_rows, keys)
    else:
        # Missing events' rows join in too: one grouping of all of them, one shuffle.
        union = reduce(
            lambda a, b: a.unionByName(b),
            (
                _tagged(rows, side, keys, carried, still_open.get(side))
                for side, rows in parts.items()
            ),
        ).where(in_scope)
        grouped = union.groupBy(*keys).agg(
            F.max("_open").alias("_row_open"),
            *(F.max(F.col("_side") == s).alias(f"_in_{s}") for s in parts),
            *(
                F.first(F.when(F.col("_side") == s, F.col(c)), ignorenulls=True).alias(f"{s}_{c}")
                for s in parts
                for c in carried
            ),
        )
    for side in ("left_late", "right_late"):
        if side not in parts:  # the same columns whichever sides have missing events
            types = dict(grouped.select(*(f"left_{c}" for c in carried)).dtypes)
            grouped = grouped.withColumns(
                {f"_in_{side}": F.lit(False)}
                | {f"{side}_{c}": F.lit(None).cast(types[f"left_{c}"]) for c in carried}
            )
    # A key that only missing events hold, on both sides alike, tells nothing.
    grouped = grouped.where(F.col("_in_left") | F.col("_in_right") | _missing_differs(rule))
    if rule.sessions:
        judged = _judge_sessions(grouped, rule, left_missing, right_missing)
    else:
        judged = _judge_additive(grouped, rule, left_missing, right_missing, names)
    outside = F.lit(False) if closed is None else ~_in_ranges(view.time_column, closed)
    is_open = outside | F.col("_row_open")
    status = F.when(is_open, F.lit(OPEN)).otherwise(F.col("_status"))
    beyond = reduce(
        lambda a, b: a | b,
        (F.abs(F.col(f"unexplained_{m}")) > F.lit(thresholds.get(m, 0.0)) for m in rule.metrics),
    )
    return judged.select(
        *keys,
        *(
            F.col(f"{prefix}_{m}")
            for m in rule.metrics
            for prefix in ("left", "right", "diff", "unexplained")
        ),
        status.alias("status"),
        ((status == UNEXPLAINED) & beyond).alias("beyond_threshold"),
        F.when(is_open, F.lit("not final on both sides yet"))
        .otherwise(F.col("_explanation"))
        .alias("explanation"),
    )


def _carried_columns(view: View, rule: Rule) -> list[str]:
    extra = [rule.user_set] if rule.user_set else []
    if rule.sessions:
        extra.append("session_end")
    return [c for c in (*rule.metrics, *extra) if c not in view.keys]


def _tagged(
    rows: DataFrame, side: str, keys: list[str], carried: list[str], still_open: Column | None
) -> DataFrame:
    is_open = F.lit(False) if still_open is None else F.coalesce(still_open, F.lit(False))
    return rows.select(*keys, *carried, F.lit(side).alias("_side"), is_open.alias("_open"))


def _side_rows(
    rows: DataFrame, side: str, keys: list[str], carried: list[str], still_open: Column | None
) -> DataFrame:
    is_open = F.lit(False) if still_open is None else F.coalesce(still_open, F.lit(False))
    return rows.select(
        *keys,
        *(F.col(c).alias(f"{side}_{c}") for c in carried),
        F.lit(True).alias(f"_in_{side}"),
        is_open.alias(f"_open_{side}"),
    )


def _joined(left: DataFrame, right: DataFrame, keys: list[str]) -> DataFrame:
    """The columns the grouping of tagged rows gives, from a full outer join of two sides."""
    joined = left.join(right, keys, "full_outer")
    return joined.withColumns(
        {
            "_in_left": F.coalesce("_in_left", F.lit(False)),
            "_in_right": F.coalesce("_in_right", F.lit(False)),
            "_row_open": F.coalesce("_open_left", F.lit(False))
            | F.coalesce("_open_right", F.lit(False)),
        }
    ).drop("_open_left", "_open_right")


def _in_ranges(column: str, ranges: Sequence[Range]) -> Column:
    tests = [(F.col(column) >= F.lit(a)) & (F.col(column) < F.lit(b)) for a, b in ranges]
    return reduce(lambda x, y: x | y, tests, F.lit(False))


def _missing_differs(rule: Rule) -> Column:
    """Only missing events hold the key: does one side's share differ from the other's?"""
    if rule.sessions:
        return F.lit(False)
    return reduce(
        lambda a, b: a | b,
        (
            ~F.coalesce(F.col(f"left_late_{m}"), F.lit(0)).eqNullSafe(
                F.coalesce(F.col(f"right_late_{m}"), F.lit(0))
            )
            for m in rule.metrics
            if m != "active_users"
        ),
    )


def _value(side: str, metric: str) -> Column:
    return F.coalesce(F.col(f"{side}_{metric}"), F.lit(0))


def _users(side: str, rule: Rule) -> Column:
    return F.coalesce(F.col(f"{side}_{rule.user_set}"), F.array().cast("array<string>"))


def _judge_additive(
    grouped: DataFrame,
    rule: Rule,
    left_missing: Missing | None,
    right_missing: Missing | None,
    names: tuple[str, str],
) -> DataFrame:
    columns: dict[str, Column] = {}
    for m in rule.metrics:
        columns[f"diff_{m}"] = _value("left", m) - _value("right", m)
        if m == "active_users" and rule.user_set:
            # Sets, not sizes: which users neither side's missing events account for. Set
            # operations on thousands of users cost; most windows are equal and skip them.
            complete_left = F.array_union(_users("left", rule), _users("left_late", rule))
            complete_right = F.array_union(_users("right", rule), _users("right_late", rule))
            differ = (
                (_users("left", rule) != _users("right", rule))
                | F.col("_in_left_late")
                | F.col("_in_right_late")
            )
            none = F.array().cast("array<string>")
            columns["_users_only_left"] = F.when(
                differ, F.array_except(complete_left, complete_right)
            ).otherwise(none)
            columns["_users_only_right"] = F.when(
                differ, F.array_except(complete_right, complete_left)
            ).otherwise(none)
        else:
            columns[f"unexplained_{m}"] = (_value("left", m) + _value("left_late", m)) - (
                _value("right", m) + _value("right_late", m)
            )
    judged = grouped.withColumns(columns)
    if rule.user_set:
        judged = judged.withColumn(
            "unexplained_active_users",
            F.size("_users_only_left") + F.size("_users_only_right"),
        )
    both = F.col("_in_left") & F.col("_in_right")
    no_diff = _all_zero("diff", rule.metrics)
    if rule.user_set:
        no_diff = no_diff & (_users("left", rule) == _users("right", rule))
    status = (
        F.when(both & no_diff, F.lit(EQUAL))
        .when(_all_zero("unexplained", rule.metrics), F.lit(EXPLAINED))
        .otherwise(F.lit(UNEXPLAINED))
    )
    contributions = [
        _contribution_text(side, label, rule)
        for side, label in (
            ("left_late", left_missing.label if left_missing else None),
            ("right_late", right_missing.label if right_missing else None),
        )
        if label is not None
    ]
    explained_by = F.concat_ws("; ", *contributions) if contributions else F.lit(None)
    unexplained_text = F.concat_ws(
        "; ",
        _presence_text(names),
        F.concat(
            F.lit("not explained by missing events: "),
            F.concat_ws(", ", *(_signed(f"unexplained_{m}", m) for m in rule.metrics)),
        ),
        *(
            [
                F.when(
                    F.size("_users_only_left") > 0,
                    _users_text(f"users only in {names[0]}", "_users_only_left"),
                ),
                F.when(
                    F.size("_users_only_right") > 0,
                    _users_text(f"users only in {names[1]}", "_users_only_right"),
                ),
            ]
            if rule.user_set
            else []
        ),
        F.when(F.length(explained_by) > 0, F.concat(F.lit("partly: "), explained_by)),
    )
    explanation = (
        F.when(status == EQUAL, F.lit(None).cast("string"))
        .when(status == EXPLAINED, explained_by)
        .otherwise(unexplained_text)
    )
    return judged.withColumns({"_status": status, "_explanation": explanation})


def _judge_sessions(
    grouped: DataFrame,
    rule: Rule,
    left_missing: Missing | None,
    right_missing: Missing | None,
) -> DataFrame:
    diffs = {f"diff_{m}": _value("left", m) - _value("right", m) for m in rule.metrics}
    judged = grouped.withColumns(diffs)
    equal = (F.col("_in_left") & F.col("_in_right")) & _all_zero("diff", rule.metrics)
    judged = judged.withColumn("_equal", equal)
    missing = [m for m in (left_missing, right_missing) if m is not None]
    if missing:
        # Each user's missing event times, joined by user (small: broadcast by Spark), so
        # the sessions are judged in the same pass that grouped them.
        judged = judged.join(_missing_times_per_user(missing), "user_id", "left")
        gap = F.make_interval(secs=F.lit(SESSION_GAP_SECONDS))
        start = F.col("session_start") - gap
        end = F.greatest("left_session_end", "right_session_end") + gap
        near = F.filter("_missing_times", lambda t: (t >= start) & (t <= end))
        judged = judged.withColumn(
            "_nearby",
            F.when(~F.col("_equal") & F.col("_missing_times").isNotNull(), F.size(near)),
        )
    else:
        judged = judged.withColumn("_nearby", F.lit(None).cast("int"))
    explained = F.coalesce(F.col("_nearby"), F.lit(0)) > 0
    status = (
        F.when(F.col("_equal"), F.lit(EQUAL))
        .when(explained, F.lit(EXPLAINED))
        .otherwise(F.lit(UNEXPLAINED))
    )
    labels = " or ".join(m.label for m in missing) or "missing events"
    gap_minutes = SESSION_GAP_SECONDS // 60
    explanation = (
        F.when(status == EQUAL, F.lit(None).cast("string"))
        .when(
            status == EXPLAINED,
            F.format_string(
                f"%d of the user's events within {gap_minutes} min of the session are {labels}",
                F.col("_nearby"),
            ),
        )
        .otherwise(
            F.concat_ws(
                "; ",
                _presence_text(("left", "right")),
                F.concat(
                    F.lit(f"no {labels} within {gap_minutes} min: "),
                    F.concat_ws(", ", *(_signed(f"diff_{m}", m) for m in rule.metrics)),
                ),
            )
        )
    )
    unexplained = {
        f"unexplained_{m}": F.when(status == UNEXPLAINED, F.col(f"diff_{m}")).otherwise(F.lit(0))
        for m in rule.metrics
    }
    return judged.withColumns({**unexplained, "_status": status, "_explanation": explanation})


def _missing_times_per_user(missing: list[Missing]) -> DataFrame:
    """user_id -> the event times of its missing events (either side's, each event once)."""
    events = reduce(
        lambda x, y: x.unionByName(y),
        (m.events.select("user_id", "event_time", "event_id") for m in missing),
    ).dropDuplicates(["event_id"])
    return events.groupBy("user_id").agg(F.collect_list("event_time").alias("_missing_times"))


def _all_zero(prefix: str, metrics: tuple[str, ...]) -> Column:
    return reduce(lambda a, b: a & b, (F.col(f"{prefix}_{m}") == 0 for m in metrics))


def _signed(column: str, metric: str) -> Column:
    return F.concat(
        F.lit(f"{metric} "),
        F.when(F.col(column) > 0, F.lit("+")).otherwise(F.lit("")),
        F.col(column).cast("string"),
    )


def _presence_text(names: tuple[str, str]) -> Column:
    return (
        F.when(~F.col("_in_right") & F.col("_in_left"), F.lit(f"only in {names[0]}"))
        .when(~F.col("_in_left") & F.col("_in_right"), F.lit(f"only in {names[1]}"))
        .when(~F.col("_in_left") & ~F.col("_in_right"), F.lit("only in missing events"))
    )


def _users_text(prefix: str, column: str) -> Column:
    shown = F.array_join(F.slice(F.col(column), 1, 5), ", ")
    more = F.when(F.size(column) > 5, F.format_string(" (+%d more)", F.size(column) - 5))
    return F.concat(F.lit(f"{prefix}: "), shown, F.coalesce(more, F.lit("")))


def _contribution_text(side: str, label: str, rule: Rule) -> Column:
    present = F.col(f"_in_{side}")
    parts = [
        _signed(f"{side}_{m}", m)
        for m in rule.metrics
        if m != "active_users" or rule.user_set is None
    ]
    return F.when(present, F.concat(F.lit(f"{label}: "), F.concat_ws(", ", *parts)))
