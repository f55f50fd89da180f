"""The event contract's rules (lakehouse.core.events) as DataFrame functions.

`validate_events` adds `reason_bits` (one bit per broken rule, 0 when the event is fine) and
the typed columns; `accepted_events` and `quarantined_records` split on it, and the latter
spells the bits out as reasons. The same functions run on a micro-batch, a whole bronze
table, or a replay.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from functools import reduce
from typing import TYPE_CHECKING

from pyspark import SparkContext
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DecimalType

from lakehouse.core import events as contract

if TYPE_CHECKING:
    from lakehouse.core.config import Settings

AMOUNT_TYPE = DecimalType(18, 2)  # exact sums: batch and speed must agree to the cent

# Event fields kept as text after validation (the others are typed: event_time, sent_at, amount).
TEXT_FIELDS = ("event_id", "event_type", "user_id", "session_id", "page", "product_id")

# Bit i of reason_bits stands for REASONS[i]; a record's reasons keep this order.
REASONS = (
    contract.REASON_OVERSIZED,
    contract.REASON_MALFORMED,
    contract.REASON_INVALID_UTF8,
    *(f"{contract.REASON_MISSING}:{f}" for f in contract.REQUIRED_FIELDS),
    *(f"{contract.REASON_WRONG_TYPE}:{f}" for f in TEXT_FIELDS),
    f"{contract.REASON_WRONG_TYPE}:event_time",
    f"{contract.REASON_WRONG_TYPE}:sent_at",
    f"{contract.REASON_WRONG_TYPE}:amount",
    contract.REASON_BAD_EVENT_TYPE,
    contract.REASON_EVENT_ID_TOO_LONG,
    contract.REASON_PURCHASE_WITHOUT_AMOUNT,
    contract.REASON_NEGATIVE_AMOUNT,
    contract.REASON_FUTURE,
)
assert len(set(REASONS)) == len(REASONS) <= 31, "one bit of an int per reason"

# The typed fields, computed once per record before the rules read them.
_EVENT_TIME, _SENT_AT, _AMOUNT = "_event_time", "_sent_at", "_amount"
_AMOUNT_GIVEN = "_amount_given"  # amount is there, of whatever JSON type
_TEXT, _WRONG = "_text_{}", "_wrong_{}"  # per string field: its text; given with another type
_WORK_COLUMNS = tuple(c.format(f) for f in contract.STRING_FIELDS for c in (_TEXT, _WRONG))


@dataclass(frozen=True)
class ValidationRules:
    max_record_bytes: int
    future_tolerance_seconds: int

    @classmethod
    def of(cls, settings: Settings) -> ValidationRules:
        """The rules the configuration sets (`speed` section), for every layer alike."""
        return cls(
            max_record_bytes=settings.speed.max_record_bytes,
            future_tolerance_seconds=settings.speed.future_tolerance_seconds,
        )


def _json(field: str) -> Column:
    """The field's JSON value (a VARIANT), SQL null when absent (lakehouse.transforms.parse)."""
    return F.col(f"event.{field}")


def _json_type(field: str) -> Column:
    """The field's JSON type as Spark names it (STRING, BIGINT, DECIMAL(p,s), DOUBLE, BOOLEAN,
    OBJECT<...>, ARRAY<...>; VOID for a JSON null), SQL null when absent."""
    return F.schema_of_variant(_json(field))


def _typed_columns() -> list[dict[str, Column]]:
    """Per string field, its text (null unless it is a JSON string) and whether it was given
    with another JSON type; amount as a decimal (null unless a number that fits). Computed
    once per record, before the rules read them: each dict is a projection on the one before.
    """
    texts: dict[str, Column] = {}
    for f in contract.STRING_FIELDS:
        # A JSON string is the one JSON value a VARIANT casts to bytes (its UTF-8); asking
        # for them is cheaper than naming the value's type.
        texts[_TEXT.format(f)] = F.try_variant_get(_json(f), "$", "binary").cast("string")
    kind = _json_type("amount")
    number = kind.isin("BIGINT", "DOUBLE") | kind.startswith("DECIMAL")
    texts[_AMOUNT] = F.when(
        number, F.try_variant_get(_json("amount"), "$", AMOUNT_TYPE.simpleString())
    )
    texts[_AMOUNT_GIVEN] = F.coalesce(kind != "VOID", F.lit(False))
    given = {
        _WRONG.format(f): _json(f).isNotNull() & ~F.is_variant_null(_json(f)) & _text(f).isNull()
        for f in contract.STRING_FIELDS
    }
    return [texts, given]


def _text(field: str) -> Column:
    return F.col(_TEXT.format(field))


def _wrong_type(field: str) -> Column:
    return F.col(_WRONG.format(field))


def _present(field: str) -> Column:
    """A JSON string that is not blank."""
    return _text(field).isNotNull() & (F.trim(_text(field)) != "")


def _iso_timestamp(field: str) -> Column:
    """The field as a timestamp when it is ISO-8601 with a zone, else null."""
    text = _text(field)
    return F.when(text.rlike(contract.ISO_TIMESTAMP_PATTERN), F.try_to_timestamp(text)).cast(
        "timestamp"
    )


def _content_rules(rules: ValidationRules) -> dict[str, Column]:
    """Reason -> the condition under which a parsed event breaks that rule."""
    event_time, amount = F.col(_EVENT_TIME), F.col(_AMOUNT)
    future_limit = F.col("kafka_timestamp") + F.make_interval(
        secs=F.lit(rules.future_tolerance_seconds)
    )
    return {
        # A field of another JSON type is there, of the wrong type: not missing.
        **{
            f"{contract.REASON_MISSING}:{f}": ~_present(f) & ~_wrong_type(f)
            for f in contract.REQUIRED_FIELDS
        },
        **{f"{contract.REASON_WRONG_TYPE}:{f}": _wrong_type(f) for f in TEXT_FIELDS},
        f"{contract.REASON_WRONG_TYPE}:event_time": _wrong_type("event_time")
        | (_present("event_time") & event_time.isNull()),
        f"{contract.REASON_WRONG_TYPE}:sent_at": _wrong_type("sent_at")
        | (_present("sent_at") & F.col(_SENT_AT).isNull()),
        f"{contract.REASON_WRONG_TYPE}:amount": F.col(_AMOUNT_GIVEN) & amount.isNull(),
        contract.REASON_BAD_EVENT_TYPE: _present("event_type")
        & ~_text("event_type").isin(*contract.EVENT_TYPES),
        contract.REASON_EVENT_ID_TOO_LONG: F.length(_text("event_id"))
        > contract.MAX_EVENT_ID_LENGTH,
        contract.REASON_PURCHASE_WITHOUT_AMOUNT: (_text("event_type") == "purchase")
        & ~F.col(_AMOUNT_GIVEN),
        contract.REASON_NEGATIVE_AMOUNT: amount < 0,
        contract.REASON_FUTURE: event_time > future_limit,
    }


def _bit(reason: str) -> Column:
    return F.lit(1 << REASONS.index(reason))


def _bit_if(condition: Column, reason: str) -> Column:
    # A null condition (a rule about a field that is absent) sets no bit.
    return F.when(condition, _bit(reason)).otherwise(F.lit(0))


def _reason_bits(rules: ValidationRules) -> Column:
    oversized = _bit_if(F.octet_length("value") > rules.max_record_bytes, contract.REASON_OVERSIZED)
    content = reduce(Column.bitwiseOR, [_bit_if(c, r) for r, c in _content_rules(rules).items()])
    # A record that is not UTF-8, or not a JSON object, has no fields to judge: that is its
    # one content reason. Only those (rare) records are checked for UTF-8 again.
    not_text = F.col("value").isNotNull() & ~F.is_valid_utf8("value")
    unreadable = F.when(not_text, _bit(contract.REASON_INVALID_UTF8)).otherwise(
        _bit(contract.REASON_MALFORMED)
    )
    return oversized.bitwiseOR(F.when(F.col("event").isNull(), unreadable).otherwise(content))


@dataclass(frozen=True)
class _Judgement:
    """The columns validate_events adds, in the projections that add them."""

    typed: list[dict[str, Column]]
    times: dict[str, Column]
    bits: Column
    judged: Column
    fields: dict[str, Column]


def _judgement(rules: ValidationRules) -> _Judgement:
    """Built once per rules and JVM: building them takes hundreds of calls into the JVM, and a
    micro-batch validates every batch. A column is an expression not yet bound to any data, so
    the same one serves every DataFrame."""
    return _judgements(rules, SparkContext._gateway)


@functools.cache
def _judgements(rules: ValidationRules, jvm: object) -> _Judgement:
    return _Judgement(
        typed=_typed_columns(),
        times={_EVENT_TIME: _iso_timestamp("event_time"), _SENT_AT: _iso_timestamp("sent_at")},
        bits=_reason_bits(rules),
        judged=F.explode(
            F.array(F.struct(F.col("_bits").alias("bits"), F.col(_EVENT_TIME).alias("time")))
        ).alias("_judged"),
        fields={
            **{f: _text(f) for f in TEXT_FIELDS},
            "reason_bits": F.col("_judged.bits"),
            "event_time": F.col("_judged.time"),
            "sent_at": F.col(_SENT_AT),
            "amount": F.when(_text("event_type") == "purchase", F.col(_AMOUNT)),
        },
    )


def validate_events(parsed: DataFrame, rules: ValidationRules) -> DataFrame:
    """Parsed bronze rows -> bronze rows with `reason_bits` and the event's fields as columns.

    The parsed `event` struct is dropped: it repeats the whole value, and a micro-batch is
    cached after this step."""
    judgement = _judgement(rules)
    typed = reduce(DataFrame.withColumns, judgement.typed, parsed).withColumns(judgement.times)
    # Exploding a one-element array is a barrier for the optimizer, as in parse_events:
    # without it, a filter on reason_bits (accepted_events) or on event_time (the batch
    # layer's) is pushed below this projection, inlined, so every rule and timestamp
    # conversion runs once in the filter and again here. Both come out of the barrier.
    judged = typed.withColumn("_bits", judgement.bits).select("*", judgement.judged)
    return judged.withColumns(judgement.fields).drop(
        "event", "_bits", "_judged", _EVENT_TIME, _SENT_AT, _AMOUNT, _AMOUNT_GIVEN, *_WORK_COLUMNS
    )


def is_accepted() -> Column:
    """True for a validated row that broke no rule."""
    return F.col("reason_bits") == 0


def reasons(bits: Column) -> Column:
    """reason_bits spelled out: the broken rules' reasons, in REASONS order."""
    empty = F.array().cast("array<string>")
    return F.concat(
        *(
            F.when(bits.bitwiseAND(1 << i) != 0, F.array(F.lit(r))).otherwise(empty)
            for i, r in enumerate(REASONS)
        )
    )


def accepted_events(validated: DataFrame) -> DataFrame:
    """Rows that pass every rule, in silver's shape."""
    return validated.where(is_accepted()).select(
        *TEXT_FIELDS,
        "amount",
        "event_time",
        "sent_at",
        F.to_date("event_time").alias("event_date"),
        F.col("partition").alias("kafka_partition"),
        F.col("offset").alias("kafka_offset"),
        "kafka_timestamp",
        "ingested_at",
    )


def quarantine_rows(records: DataFrame, why: Column, reason: Column) -> DataFrame:
    """Bronze rows as bronze.quarantine's: the raw record, its Kafka coordinates, its
    reasons (`why`, an array) and `reason` (their text)."""
    return records.select(
        "topic",
        F.col("partition").alias("kafka_partition"),
        F.col("offset").alias("kafka_offset"),
        "kafka_timestamp",
        "key",
        "value",
        F.octet_length("value").alias("value_bytes"),
        why.alias("reasons"),
        reason.alias("reason"),
        F.col("ingested_at").alias("quarantined_at"),
    )


@functools.cache
def _reasons_of_the_bits(jvm: object) -> Column:
    """reasons() of the `reason_bits` column, built once per JVM (as _judgement)."""
    return reasons(F.col("reason_bits"))


def quarantined_records(validated: DataFrame) -> DataFrame:
    """Rows that break a rule: the raw record, its Kafka coordinates and every reason."""
    spelled = _reasons_of_the_bits(SparkContext._gateway)
    broken = validated.where(~is_accepted()).withColumn("reasons", spelled)
    return quarantine_rows(broken, F.col("reasons"), F.array_join("reasons", "; "))
