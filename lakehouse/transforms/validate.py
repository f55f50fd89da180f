"""The event contract's rules (lakehouse.events) as DataFrame functions.

`validate_events` adds `reasons` (one entry per broken rule, empty when the event is fine)
and the typed columns; `accepted_events` and `quarantined_records` split on it. The same
functions run on a micro-batch, a whole bronze table, or a replay.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DecimalType

from lakehouse import events as contract

AMOUNT_TYPE = DecimalType(18, 2)  # exact sums: batch and speed must agree to the cent


@dataclass(frozen=True)
class ValidationRules:
    max_record_bytes: int
    future_tolerance_seconds: int


def _text(field: str) -> Column:
    return F.col(f"event.{field}")


def _present(field: str) -> Column:
    return _text(field).isNotNull() & (F.trim(_text(field)) != "")


def _iso_timestamp(field: str) -> Column:
    """The field as a timestamp when it is ISO-8601 with a zone, else null."""
    text = _text(field)
    return F.when(text.rlike(contract.ISO_TIMESTAMP_PATTERN), F.try_to_timestamp(text)).cast(
        "timestamp"
    )


def _reason_rules(rules: ValidationRules) -> list[Column]:
    event_time = _iso_timestamp("event_time")
    amount = _text("amount").try_cast(AMOUNT_TYPE)
    future_limit = F.col("kafka_timestamp") + F.make_interval(
        secs=F.lit(rules.future_tolerance_seconds)
    )
    checks: list[tuple[Column, str]] = [
        (~_present(f), f"{contract.REASON_MISSING}:{f}") for f in contract.REQUIRED_FIELDS
    ]
    checks += [
        (_present("event_time") & event_time.isNull(), f"{contract.REASON_WRONG_TYPE}:event_time"),
        (
            _present("sent_at") & _iso_timestamp("sent_at").isNull(),
            f"{contract.REASON_WRONG_TYPE}:sent_at",
        ),
        (_present("amount") & amount.isNull(), f"{contract.REASON_WRONG_TYPE}:amount"),
        (
            _present("event_type") & ~_text("event_type").isin(*contract.EVENT_TYPES),
            contract.REASON_BAD_EVENT_TYPE,
        ),
        (
            F.length(_text("event_id")) > contract.MAX_EVENT_ID_LENGTH,
            contract.REASON_EVENT_ID_TOO_LONG,
        ),
        (
            (_text("event_type") == "purchase") & ~_present("amount"),
            contract.REASON_PURCHASE_WITHOUT_AMOUNT,
        ),
        (amount < 0, contract.REASON_NEGATIVE_AMOUNT),
        (event_time > future_limit, contract.REASON_FUTURE),
    ]
    return [_reason_if(condition, reason) for condition, reason in checks]


def _reason_if(condition: Column, reason: str) -> Column:
    """[reason] when `condition` holds, else []: rules are concatenated, never filtered,
    because a filter with a lambda runs interpreted, with every rule under it (measured:
    validation cost more than the JSON parse)."""
    return F.when(condition, F.array(F.lit(reason))).otherwise(F.array().cast("array<string>"))


# Event fields kept as text after validation (the others are typed: event_time, sent_at, amount).
TEXT_FIELDS = ("event_id", "event_type", "user_id", "session_id", "page", "product_id")


def validate_events(parsed: DataFrame, rules: ValidationRules) -> DataFrame:
    """Parsed bronze rows -> bronze rows with `reasons` and the event's fields as columns.

    The parsed `event` struct is dropped: it repeats the whole value, and a micro-batch is
    cached after this step."""
    oversized = F.octet_length("value") > rules.max_record_bytes
    malformed = F.col("event").isNull() | _text(contract.CORRUPT_COLUMN).isNotNull()
    content_reasons = F.when(malformed, F.array(F.lit(contract.REASON_MALFORMED))).otherwise(
        F.concat(*_reason_rules(rules))
    )
    reasons = F.concat(_reason_if(oversized, contract.REASON_OVERSIZED), content_reasons)
    return (
        parsed.withColumn("reasons", reasons)
        .withColumns(
            {
                **{f: _text(f) for f in TEXT_FIELDS},
                "event_time": _iso_timestamp("event_time"),
                "sent_at": _iso_timestamp("sent_at"),
                "amount": F.when(
                    _text("event_type") == "purchase", _text("amount").try_cast(AMOUNT_TYPE)
                ),
            }
        )
        .drop("event")
    )


def accepted_events(validated: DataFrame) -> DataFrame:
    """Rows that pass every rule, in silver's shape."""
    return validated.where(F.size("reasons") == 0).select(
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


def quarantined_records(validated: DataFrame) -> DataFrame:
    """Rows that break a rule: the raw record, its Kafka coordinates and every reason."""
    return validated.where(F.size("reasons") > 0).select(
        "topic",
        F.col("partition").alias("kafka_partition"),
        F.col("offset").alias("kafka_offset"),
        "kafka_timestamp",
        "key",
        "value",
        F.octet_length("value").alias("value_bytes"),
        "reasons",
        F.array_join("reasons", "; ").alias("reason"),
        F.col("ingested_at").alias("quarantined_at"),
    )
