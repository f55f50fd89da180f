"""The commerce contracts (lakehouse.core.commerce) and the order lifecycle as DataFrame
functions, the same for the commerce stream's micro-batches, the batch fold over
bronze.commerce_raw and a replay from the log.

    validate_records       bronze rows of one topic -> the fields, typed, and `reasons`
    accepted_order_events  -> silver.order_events rows   accepted_payments -> silver.payments
    quarantined_records    -> bronze.commerce_quarantine rows
    first_deliveries       one row per id: the first delivery in the log
    fold_order_events      an order's events, in log order, onto its previous state row
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import DecimalType

from lakehouse.core import commerce as contract
from lakehouse.core.commerce import NUMBER, STRING, TIMESTAMP, Contract
from lakehouse.core.events import (
    ISO_TIMESTAMP_PATTERN,
    REASON_INVALID_UTF8,
    REASON_MALFORMED,
    REASON_MISSING,
    REASON_NEGATIVE_AMOUNT,
    REASON_OVERSIZED,
    REASON_WRONG_TYPE,
)
from lakehouse.core.frames import rows_frame
from lakehouse.core.tables import ORDER_STATE, REJECTED_TRANSITIONS
from lakehouse.transforms.json_text import with_one_json_object
from lakehouse.transforms.parse import decoded_value
from lakehouse.transforms.validate import ValidationRules, quarantine_rows

AMOUNT_TYPE = DecimalType(18, 2)  # as the click events': sums exact to the cent
KAFKA_COLUMNS = ("kafka_partition", "kafka_offset", "kafka_timestamp", "ingested_at")
ORDER_EVENT_COLUMNS = (*contract.ORDER_EVENT.field_names, *KAFKA_COLUMNS)
PAYMENT_COLUMNS = (*contract.PAYMENT.field_names, *KAFKA_COLUMNS)
STATE_COLUMNS = tuple(c.split()[0] for c in ORDER_STATE.split(", "))
REJECTED_COLUMNS = tuple(c.split()[0] for c in REJECTED_TRANSITIONS.split(", "))


# --- parse and validate --------------------------------------------------------------------


def _json_schema(spec: Contract) -> str:
    # Each field as a VARIANT: a JSON value that keeps its type, so `"order_id": 7` is told
    # from `"order_id": "7"` (as lakehouse.transforms.parse does for click events).
    return "struct<" + ", ".join(f"`{f}`: variant" for f in spec.field_names) + ">"


def _parsed(raw: DataFrame, spec: Contract) -> DataFrame:
    """Bronze rows with `_json`: the contract's fields as VARIANTs, null when the value is not
    UTF-8 or not exactly one JSON object (lakehouse.transforms.json_text)."""
    return with_one_json_object(raw, F.expr(decoded_value()), _json_schema(spec), "_json")


def _value(field: str) -> Column:
    return F.col(f"_json.`{field}`")


def _given(field: str) -> Column:
    """The field is there with a value (a JSON null counts as absent)."""
    return _value(field).isNotNull() & ~F.is_variant_null(_value(field))


def _text_of(field: str) -> Column:
    """The field's text when it is a JSON string (the one JSON value a VARIANT casts to bytes),
    else null."""
    return F.try_variant_get(_value(field), "$", "binary").cast("string")


def _number_of(field: str) -> Column:
    kind = F.schema_of_variant(_value(field))
    number = kind.isin("BIGINT", "DOUBLE") | kind.startswith("DECIMAL")
    return F.when(number, F.try_variant_get(_value(field), "$", AMOUNT_TYPE.simpleString()))


_TEXT = "_text_{}"  # a timestamp field's text, while its rules are judged


def _typed(spec: Contract) -> list[dict[str, Column]]:
    """Each field as its typed column (null when absent or of another JSON type), and each
    timestamp field's text: two projections, the second on the first."""
    typed: dict[str, Column] = {}
    for field, kind in spec.fields:
        if kind == NUMBER:
            typed[field] = _number_of(field)
        else:
            typed[field if kind == STRING else _TEXT.format(field)] = _text_of(field)
    times = {
        field: F.when(
            F.col(_TEXT.format(field)).rlike(ISO_TIMESTAMP_PATTERN),
            F.try_to_timestamp(F.col(_TEXT.format(field))),
        ).cast("timestamp")
        for field in spec.fields_of(TIMESTAMP)
    }
    return [typed, times]


def _not_blank(value: Column) -> Column:
    return value.isNotNull() & (F.trim(value.cast("string")) != "")


def _field_rules(spec: Contract) -> list[tuple[str, Column]]:
    """(reason, condition) per rule on one field, in the contract's field order. A timestamp
    is judged by its text: blank is missing, anything but ISO-8601 with a zone a wrong type."""
    rules: list[tuple[str, Column]] = []
    for field, kind in spec.fields:
        text = F.col(_TEXT.format(field) if kind == TIMESTAMP else field)
        # A value of another JSON type is there, of the wrong type: not missing.
        wrong = _given(field) & text.isNull()
        if kind == TIMESTAMP:
            wrong = wrong | (_not_blank(text) & F.col(field).isNull())
        if field in spec.required:
            rules.append((f"{REASON_MISSING}:{field}", ~_not_blank(text) & ~wrong))
        rules.append((f"{REASON_WRONG_TYPE}:{field}", wrong))
    return rules


def _contract_rules(spec: Contract, rules: ValidationRules) -> list[tuple[str, Column]]:
    """(reason, condition) for every rule a readable record of `spec` can break."""
    checks = _field_rules(spec)
    key = F.expr("try_validate_utf8(key)")
    checks.append(
        (
            contract.REASON_KEY_MISMATCH,
            _not_blank(F.col("order_id")) & ~F.coalesce(key == F.col("order_id"), F.lit(False)),
        )
    )
    if spec is contract.ORDER_EVENT:
        checks.append(
            (
                contract.REASON_UNKNOWN_TYPE,
                _not_blank(F.col("type")) & ~F.col("type").isin(*contract.ORDER_EVENT_TYPES),
            )
        )
        checks.append(
            (
                contract.REASON_PLACED_WITHOUT_AMOUNT,
                (F.col("type") == contract.PLACED) & ~_given("amount"),
            )
        )
    checks.append((REASON_NEGATIVE_AMOUNT, F.col("amount") < 0))
    limit = F.col("kafka_timestamp") + F.make_interval(secs=F.lit(rules.future_tolerance_seconds))
    checks.append((spec.future_reason, F.col(spec.time_field) > limit))
    return checks


def _reasons(spec: Contract, rules: ValidationRules) -> Column:
    """Every broken rule's reason, in the contract's order; none for an accepted record."""

    def listed(checks: list[tuple[str, Column]]) -> Column:
        # A null condition (a rule about an absent field) lists nothing.
        return F.array_compact(F.array(*(F.when(c, F.lit(r)).cast("string") for r, c in checks)))

    oversized = listed([(REASON_OVERSIZED, F.octet_length("value") > rules.max_record_bytes)])
    # A record that is not UTF-8, or not one JSON object, has no fields to judge: that is its
    # one content reason.
    not_text = F.col("value").isNotNull() & ~F.is_valid_utf8("value")
    unreadable = F.array(
        F.when(not_text, F.lit(REASON_INVALID_UTF8)).otherwise(F.lit(REASON_MALFORMED))
    )
    content = F.when(F.col("_json").isNull(), unreadable).otherwise(
        listed(_contract_rules(spec, rules))
    )
    return F.concat(oversized, content)


def validate_records(raw: DataFrame, spec: Contract, rules: ValidationRules) -> DataFrame:
    """Bronze rows of `spec`'s topic -> the bronze rows with the contract's fields, typed, and
    `reasons` (empty when the record breaks no rule)."""
    typed, times = _typed(spec)
    parsed = _parsed(raw, spec).withColumns(typed).withColumns(times)
    texts = [_TEXT.format(f) for f in spec.fields_of(TIMESTAMP)]
    return parsed.withColumn("reasons", _reasons(spec, rules)).drop("_json", *texts)


def accepted(validated: DataFrame, spec: Contract) -> DataFrame:
    """Records that break no rule, in their silver table's shape."""
    return validated.where(F.size("reasons") == 0).select(
        *spec.field_names,
        F.col("partition").alias("kafka_partition"),
        F.col("offset").alias("kafka_offset"),
        "kafka_timestamp",
        "ingested_at",
    )


def accepted_order_events(validated: DataFrame) -> DataFrame:
    return accepted(validated, contract.ORDER_EVENT)


def accepted_payments(validated: DataFrame) -> DataFrame:
    return accepted(validated, contract.PAYMENT)


def quarantined_records(validated: DataFrame) -> DataFrame:
    """Records that break a rule: the raw record, its Kafka coordinates and every reason."""
    broken = validated.where(F.size("reasons") > 0)
    return quarantine_rows(broken, F.col("reasons"), F.array_join("reasons", "; "))


# --- identity ------------------------------------------------------------------------------


def first_deliveries(rows: DataFrame, id_column: str) -> DataFrame:
    """One row per id: the earliest in the log (partition, offset), whatever later deliveries
    say. Static DataFrames only."""
    position = F.struct("kafka_partition", "kafka_offset")
    first = F.min(position).over(Window.partitionBy(id_column))
    return rows.withColumn("_first", first).where(position == F.col("_first")).drop("_first")


def not_seen(rows: DataFrame, seen: DataFrame, id_column: str) -> DataFrame:
    """Rows whose id is not in `seen` (an earlier batch's silver rows)."""
    return rows.join(seen.select(id_column), id_column, "left_anti")


# --- the fold ------------------------------------------------------------------------------

_STATE_STRUCT = (
    "struct<user_id: string, status: string, amount: decimal(18,2), placed_at: timestamp, "
    "updated_at: timestamp, events_applied: bigint, rejected: bigint, last_event_id: string, "
    "kafka_partition: int, kafka_offset: bigint, rejections: array<struct<event_id: string, "
    "type: string, from_status: string, reason: string, event_time: timestamp, "
    "kafka_partition: int, kafka_offset: bigint, rejected_at: timestamp>>>"
)
# An event as the fold reads it; the struct's first fields are its log position, so sorting
# the structs sorts the events in log order.
_EVENT_FIELDS = (
    "kafka_partition",
    "kafka_offset",
    "event_id",
    "type",
    "user_id",
    "amount",
    "event_time",
    "ingested_at",
)


def empty_state(spark: SparkSession) -> DataFrame:
    """No state rows (the fold of a whole log starts from it), in silver.order_state's shape."""
    return rows_frame(spark, [], ORDER_STATE)


def _start(previous: Column) -> Column:
    """The fold's start for one order: its previous state row, or an order not placed yet."""

    def was(field: str, default: Column) -> Column:
        return F.coalesce(previous.getField(field), default)

    return F.struct(
        previous.getField("user_id").alias("user_id"),
        was("status", F.lit(contract.STATUS_NONE)).alias("status"),
        previous.getField("amount").alias("amount"),
        previous.getField("placed_at").alias("placed_at"),
        previous.getField("updated_at").alias("updated_at"),
        was("events_applied", F.lit(0).cast("bigint")).alias("events_applied"),
        was("rejected", F.lit(0).cast("bigint")).alias("rejected"),
        previous.getField("last_event_id").alias("last_event_id"),
        previous.getField("kafka_partition").alias("kafka_partition"),
        previous.getField("kafka_offset").alias("kafka_offset"),
        F.array().alias("rejections"),
    ).cast(_STATE_STRUCT)


def _step(state: Column, event: Column) -> Column:
    """The state after one event: applied when the lifecycle allows its transition, else the
    state unchanged but for one more rejection."""
    status, kind = state.getField("status"), event.getField("type")
    allowed = F.concat_ws("->", status, kind).isin(
        *(contract.transition(s, t) for s, t in contract.TRANSITIONS)
    )
    placed = kind == contract.PLACED

    def on_placed(field: str, value: Column) -> Column:
        return F.when(placed, value).otherwise(state.getField(field))

    applied = F.struct(
        on_placed("user_id", event.getField("user_id")).alias("user_id"),
        kind.alias("status"),
        on_placed("amount", event.getField("amount")).alias("amount"),
        on_placed("placed_at", event.getField("event_time")).alias("placed_at"),
        event.getField("event_time").alias("updated_at"),
        (state.getField("events_applied") + 1).alias("events_applied"),
        state.getField("rejected").alias("rejected"),
        event.getField("event_id").alias("last_event_id"),
        event.getField("kafka_partition").alias("kafka_partition"),
        event.getField("kafka_offset").alias("kafka_offset"),
        state.getField("rejections").alias("rejections"),
    ).cast(_STATE_STRUCT)
    rejection = F.struct(
        event.getField("event_id").alias("event_id"),
        kind.alias("type"),
        status.alias("from_status"),
        F.concat(F.lit(f"{contract.REASON_INVALID_TRANSITION}:"), status, F.lit("->"), kind).alias(
            "reason"
        ),
        event.getField("event_time").alias("event_time"),
        event.getField("kafka_partition").alias("kafka_partition"),
        event.getField("kafka_offset").alias("kafka_offset"),
        # When the pipeline received the event: the same in every fold of the same log.
        event.getField("ingested_at").alias("rejected_at"),
    )
    refused = state.withField("rejected", state.getField("rejected") + 1).withField(
        "rejections", F.concat(state.getField("rejections"), F.array(rejection))
    )
    return F.when(allowed, applied).otherwise(refused.cast(_STATE_STRUCT))


def fold_order_events(events: DataFrame, previous: DataFrame) -> DataFrame:
    """Accepted order events (first deliveries, none folded before) and the previous state
    rows -> per order the events touch, its state row after them and `rejections` (the
    events the lifecycle refused, as silver.order_transitions_rejected rows): split them with
    state_rows and rejection_rows.

    Each order's events are applied in log order (kafka_partition, kafka_offset), never by
    event_time: the log is the source of truth. Deterministic, so folding a log in one batch
    or in many gives the same state. An order that so far has only refused events (never
    placed) keeps a state row of status `none`, so its rejections stay counted when its
    placed comes later."""
    grouped = events.groupBy("order_id").agg(
        F.array_sort(F.collect_list(F.struct(*_EVENT_FIELDS))).alias("_events")
    )
    before = previous.select("order_id", F.struct(*STATE_COLUMNS[1:]).alias("_previous"))
    state = F.aggregate("_events", _start(F.col("_previous")), _step)
    folded = grouped.join(before, "order_id", "left").select("order_id", state.alias("_s"))
    return folded.select("order_id", "_s.*")


def state_rows(folded: DataFrame) -> DataFrame:
    """fold_order_events' rows as silver.order_state rows."""
    return folded.select(*STATE_COLUMNS)


def rejection_rows(folded: DataFrame) -> DataFrame:
    """fold_order_events' refused events as silver.order_transitions_rejected rows."""
    refused = folded.select("order_id", F.explode("rejections").alias("_r"))
    return refused.select(*(c if c == "order_id" else F.col(f"_r.{c}") for c in REJECTED_COLUMNS))


def fold_log(order_events: DataFrame) -> DataFrame:
    """Every accepted delivery of the whole log's order events -> fold_order_events' rows for
    every order: the batch fold, with the functions the stream applies batch by batch."""
    firsts = first_deliveries(order_events, "event_id")
    return fold_order_events(firsts, empty_state(order_events.sparkSession))
