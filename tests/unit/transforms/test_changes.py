"""Debezium change records: every quarantine reason, and the rules that make current and
history right whatever the delivery (commit order, duplicates, deletes, key updates, batches)."""

from __future__ import annotations

import itertools
import json
import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from pyspark.testing import assertDataFrameEqual

from lakehouse.cdc.shop import PRODUCTS, USERS
from lakehouse.core.frames import rows_frame
from lakehouse.core.tables import table
from lakehouse.transforms.changes import (
    REASON_BAD_OP,
    REASON_KEY_MISMATCH,
    REASON_MALFORMED_KEY,
    REASON_MISSING_AFTER,
    REASON_MISSING_BEFORE,
    REASON_MISSING_LSN,
    REASON_MISSING_OP,
    REASON_MISSING_SOURCE,
    accepted_changes,
    apply_changes,
    apply_history,
    current_rows,
    history_rows,
    parse_changes,
    quarantined_changes,
    typed_rows,
    unapplied_changes,
    winning_changes,
)

pytestmark = pytest.mark.slow  # make test-fast leaves it out (docs/testing.md)

T0 = datetime(2026, 11, 25, 10, 0, tzinfo=UTC)
RAW = (
    "key binary, value binary, topic string, partition int, offset long, "
    "kafka_timestamp timestamp, ingested_at timestamp"
)
CURRENT = table("silver.users_current").schema
HISTORY = table("silver.users_history").schema


def at(minute: float) -> datetime:
    return T0 + timedelta(minutes=minute)


def iso(minute: float) -> str:
    """A timestamptz as Debezium sends it (ZonedTimestamp)."""
    return at(minute).isoformat(timespec="microseconds").replace("+00:00", "Z")


def user(user_id: str, segment: str = "new", minute: float = 0, country: str = "DE") -> dict:
    return {"user_id": user_id, "segment": segment, "country": country, "updated_at": iso(minute)}


def envelope(
    op: str,
    before: dict | None,
    after: dict | None,
    lsn: int,
    *,
    tx: int = 1,
    committed: float = 0,
    snapshot: str = "false",
) -> dict[str, Any]:
    return {
        "before": before,
        "after": after,
        "source": {
            "version": "3.6.1.Final",
            "connector": "postgresql",
            "name": "shop",
            "ts_ms": int(at(committed).timestamp() * 1000),
            "snapshot": snapshot,
            "db": "shop",
            "schema": "public",
            "table": "users",
            "txId": tx,
            "lsn": lsn,
            "xmin": None,
        },
        "op": op,
        "ts_ms": int(at(committed).timestamp() * 1000) + 7,
        "transaction": None,
    }


Record = tuple[Any, Any]  # (key, value): a dict is sent as JSON, bytes as they are


def key_of(user_id: str) -> dict[str, str]:
    return {"user_id": user_id}


def create(row: dict, lsn: int, **source: Any) -> list[Record]:
    return [(key_of(row["user_id"]), envelope("c", None, row, lsn, **source))]


def read(row: dict, lsn: int, **source: Any) -> list[Record]:
    return [(key_of(row["user_id"]), envelope("r", None, row, lsn, snapshot="true", **source))]


def update(before: dict, after: dict, lsn: int, **source: Any) -> list[Record]:
    return [(key_of(after["user_id"]), envelope("u", before, after, lsn, **source))]


def delete(row: dict, lsn: int, **source: Any) -> list[Record]:
    """A delete and its tombstone."""
    key = key_of(row["user_id"])
    return [(key, envelope("d", row, None, lsn, **source)), (key, None)]


def encoded(value: Any) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    return (value if isinstance(value, str) else json.dumps(value)).encode()


def raw(spark, records: list[Record], first_offset: int = 0, topic: str = "shop.public.users"):
    """Kafka records as bronze rows, offsets in list order from `first_offset`."""
    rows = [
        (encoded(k), encoded(v), topic, 0, first_offset + i, at(i), at(i))
        for i, (k, v) in enumerate(records)
    ]
    return rows_frame(spark, rows, RAW)


def changes_of(spark, records: list[Record], first_offset: int = 0, table_=USERS):
    topic = f"shop.public.{table_.name}"
    parsed = raw(spark, records, first_offset, topic).transform(parse_changes)
    assert quarantined_changes(parsed).count() == 0
    return accepted_changes(parsed).transform(typed_rows, table_)


def current_of(spark, rows: list[tuple]) -> Any:
    return rows_frame(spark, rows, CURRENT)


def users(frame) -> dict[str, tuple]:
    """user_id -> (segment, updated_at minute) of current rows or row changes."""
    return {
        r["user_id"]: (r["segment"], (r["updated_at"] - T0.replace(tzinfo=None)).seconds / 60)
        for r in frame.collect()
    }


def versions(history) -> list[tuple]:
    """History rows as (user_id, segment, valid_from, valid_to, is_current, deleted), minutes
    after T0, in key and time order."""

    def minutes(t: datetime | None) -> float | None:
        return None if t is None else (t - T0.replace(tzinfo=None)).total_seconds() / 60

    rows = history.orderBy("user_id", "lsn").collect()
    return [
        (
            r["user_id"],
            r["segment"],
            minutes(r["valid_from"]),
            minutes(r["valid_to"]),
            r["is_current"],
            r["deleted"],
        )
        for r in rows
    ]


def test_a_change_is_kept_with_its_position_and_what_its_envelope_says(spark) -> None:
    records = create(user("u1"), 5001, tx=77, committed=1.5)
    [row] = accepted_changes(raw(spark, records).transform(parse_changes)).collect()
    assert (row["topic"], row["partition"], row["offset"]) == ("shop.public.users", 0, 0)
    assert (row["op"], row["lsn"], row["tx_id"], row["snapshot"]) == ("c", 5001, 77, "false")
    assert row["commit_time"] == at(1.5).replace(tzinfo=None)
    assert row["tombstone"] is False
    assert json.loads(row["key_json"]) == {"user_id": "u1"}
    assert row["before"] is None
    assert json.loads(row["after"]) == user("u1")
    assert row["key"] == b'{"user_id": "u1"}' and json.loads(row["value"])["op"] == "c"


def good(op: str = "c", **envelope_overrides: Any) -> dict[str, Any]:
    before = user("u1") if op in ("u", "d") else None
    after = user("u1") if op != "d" else None
    value = envelope(op, before, after, 10)
    value.update(envelope_overrides)
    return value


def without_lsn() -> dict[str, Any]:
    value = good()
    del value["source"]["lsn"]
    return value


KEY = key_of("u1")
# (key, value, reasons): one frame holds them all, as one batch would.
RECORDS: list[tuple[Any, Any, list[str]]] = [
    (KEY, good(), []),
    (KEY, good("u"), []),
    (KEY, good("r"), []),
    (KEY, good("d"), []),
    (KEY, None, []),  # a tombstone
    (KEY, '{"before": null, "after": {"user_id": "u1"', ["malformed_json"]),
    # Cut short after a field that parses: malformed, not a record missing its other fields.
    (KEY, '{"op": "u", "after": {"user_id": ', ["malformed_json"]),
    (KEY, "not json", ["malformed_json"]),
    (KEY, "[1, 2]", ["malformed_json"]),
    (KEY, '"a string"', ["malformed_json"]),
    (KEY, json.dumps(good()).replace('"', "'"), ["malformed_json"]),
    (KEY, json.dumps(good()).replace('"ts_ms": ', '"ts_ms": NaN, "x": '), ["malformed_json"]),
    (KEY, b'{"op": "\xff"}', ["invalid_utf8"]),
    (None, good(), [REASON_MALFORMED_KEY]),
    (b"\xc3\x28", good(), [REASON_MALFORMED_KEY]),
    ("u1", good(), [REASON_MALFORMED_KEY]),
    ({}, good(), [REASON_MALFORMED_KEY]),
    (None, None, [REASON_MALFORMED_KEY]),  # a tombstone without a key
    ("[1]", "nonsense", ["malformed_json", REASON_MALFORMED_KEY]),
    (KEY, good(op=None), [REASON_MISSING_OP]),
    (KEY, {k: v for k, v in good().items() if k != "op"}, [REASON_MISSING_OP]),
    (KEY, good(source=None), [REASON_MISSING_SOURCE]),
    (KEY, without_lsn(), [REASON_MISSING_LSN]),
    (KEY, good(op="t"), [REASON_BAD_OP]),  # a TRUNCATE
    (KEY, good(op="m"), [REASON_BAD_OP]),  # a logical decoding message
    (KEY, good("u", after=None), [REASON_MISSING_AFTER]),
    (KEY, good("c", after=None), [REASON_MISSING_AFTER]),
    (KEY, good("d", before=None), [REASON_MISSING_BEFORE]),
    (KEY, good("u", after="a string"), [REASON_MISSING_AFTER]),
    (KEY, good("d", before=[1]), [REASON_MISSING_BEFORE]),
    (key_of("u2"), good(), [REASON_KEY_MISMATCH]),
    (key_of("u2"), good("d"), [REASON_KEY_MISMATCH]),
    (KEY, good(after={"segment": "new"}), [REASON_KEY_MISMATCH]),
    ({"user_id": "u1", "tenant": "t1"}, good(), [REASON_KEY_MISMATCH]),
    ("{}", {}, [REASON_MALFORMED_KEY, REASON_MISSING_OP, REASON_MISSING_SOURCE]),
]


def test_each_broken_record_is_quarantined_with_its_reasons_and_the_rest_kept(spark) -> None:
    records = [(k, v) for k, v, _ in RECORDS]
    parsed = raw(spark, records).transform(parse_changes)
    found = [r["reasons"] for r in parsed.orderBy("offset").collect()]
    wanted = [sorted(r, key=_reason_order) for _, _, r in RECORDS]
    wrong = [(rec, w, f) for rec, w, f in zip(RECORDS, wanted, found, strict=True) if w != f]
    assert not wrong, "\n".join(f"{r[:2]!r}: expected {w}, got {f}" for r, w, f in wrong)

    kept = {r["offset"] for r in accepted_changes(parsed).collect()}
    quarantined = quarantined_changes(parsed).collect()
    assert kept == {i for i, (_, _, reasons) in enumerate(RECORDS) if not reasons}
    assert {r["kafka_offset"] for r in quarantined} == set(range(len(RECORDS))) - kept
    lsn_missing = next(i for i, (_, _, r) in enumerate(RECORDS) if r == [REASON_MISSING_LSN])
    [missing] = [r for r in quarantined if r["kafka_offset"] == lsn_missing]
    assert missing["reason"] == REASON_MISSING_LSN
    assert missing["value"] == encoded(RECORDS[lsn_missing][1])


def _reason_order(reason: str) -> int:
    from lakehouse.transforms.changes import REASONS

    return REASONS.index(reason)


def test_a_tombstone_is_kept_in_bronze_and_never_applied(spark) -> None:
    records = [*create(user("u1"), 10), *delete(user("u1"), 11), *create(user("u2"), 12)]
    bronze = accepted_changes(raw(spark, records).transform(parse_changes))
    [tombstone] = bronze.where("tombstone").collect()
    assert tombstone["offset"] == 2 and tombstone["op"] is None and tombstone["lsn"] is None
    assert json.loads(tombstone["key_json"]) == {"user_id": "u1"}
    rows = bronze.transform(typed_rows, USERS)
    assert rows.count() == 3
    assert users(current_rows(rows, USERS)) == {"u2": ("new", 0)}


def test_numerics_and_timestamps_arrive_as_text_and_are_typed(spark) -> None:
    def product(price: Any) -> dict:
        return {
            "product_id": "p1",
            "name": "Mug",
            "category": "kitchen",
            "price": price,
            "updated_at": "2026-11-25T10:00:00.123456Z",
        }

    records = [
        ({"product_id": "p1"}, envelope("c", None, product("19.90"), 10)),
        ({"product_id": "p1"}, envelope("u", product("19.90"), product("a lot"), 11)),
    ]
    rows = changes_of(spark, records[:1], table_=PRODUCTS).collect()
    assert [r["price"] for r in rows] == [Decimal("19.90")]
    assert rows[0]["updated_at"] == datetime(2026, 11, 25, 10, 0, 0, 123456)
    assert (rows[0]["name"], rows[0]["category"], rows[0]["deletes"]) == ("Mug", "kitchen", False)


@pytest.mark.parametrize(
    ("column", "value"),
    [("price", "a lot"), ("price", "1e400"), ("updated_at", "yesterday"), ("price", [1])],
)
def test_a_value_that_is_not_of_its_column_s_type_is_quarantined_not_applied_as_null(
    spark, column: str, value: Any
) -> None:
    good = {"product_id": "p1", "name": "Mug", "price": "19.90", "updated_at": iso(0)}
    bad = {**good, column: value, "name": None}  # a null in the database stays a null
    records = [
        ({"product_id": "p1"}, envelope("c", None, good, 10)),
        ({"product_id": "p1"}, envelope("u", good, bad, 11)),
        ({"product_id": "p1"}, envelope("d", bad, None, 12)),
    ]
    topic = "shop.public.products"
    parsed = raw(spark, records, topic=topic).transform(parse_changes, {topic: PRODUCTS})
    found = {r["offset"]: r["reasons"] for r in parsed.collect()}
    assert found == {0: [], 1: [f"wrong_type:{column}"], 2: [f"wrong_type:{column}"]}
    kept = accepted_changes(parsed).transform(typed_rows, PRODUCTS).collect()
    assert [(r["lsn"], r["price"]) for r in kept] == [(10, Decimal("19.90"))]


def test_a_snapshot_read_is_an_insert_and_reading_it_again_opens_no_version(spark) -> None:
    records = [
        *read(user("u1", "gold"), 100),
        *read(user("u2"), 100),
        *update(user("u1", "gold"), user("u1", "silver", 5), 150, committed=5),
        *read(user("u1", "silver", 5), 200),  # a snapshot taken again
        *read(user("u2"), 200),
    ]
    rows = changes_of(spark, records)
    assert users(current_rows(rows, USERS)) == {"u1": ("silver", 5), "u2": ("new", 0)}
    assert versions(history_rows(rows, USERS)) == [
        ("u1", "gold", 0, 5, False, False),
        ("u1", "silver", 5, None, True, False),
        ("u2", "new", 0, None, True, False),
    ]


def test_commit_order_wins_over_arrival_order(spark) -> None:
    records = [
        *update(user("u1", "b", 2), user("u1", "c", 3), 30, committed=3),
        *create(user("u1", "a", 1), 10, committed=1),
        *update(user("u1", "a", 1), user("u1", "b", 2), 20, committed=2),
    ]
    rows = changes_of(spark, records)
    [winner] = winning_changes(rows, USERS).collect()
    assert (winner["segment"], winner["lsn"], winner["kafka_offset"]) == ("c", 30, 0)
    assert users(current_rows(rows, USERS)) == {"u1": ("c", 3)}
    assert versions(history_rows(rows, USERS)) == [
        ("u1", "a", 1, 2, False, False),
        ("u1", "b", 2, 3, False, False),
        ("u1", "c", 3, None, True, False),
    ]


def test_a_change_delivered_twice_is_applied_once(spark) -> None:
    first = [
        *create(user("u1", "a", 1), 10, committed=1),
        *update(user("u1", "a", 1), user("u1", "b", 2), 20, committed=2),
    ]
    # A restarted connector sends again what it had not confirmed.
    records = [*first, *first[1:], *delete(user("u1", "b", 2), 30, committed=3), *first]
    rows = changes_of(spark, records)
    once = changes_of(spark, [*first, *delete(user("u1", "b", 2), 30, committed=3)])
    assertDataFrameEqual(history_rows(rows, USERS), history_rows(once, USERS))
    assert versions(history_rows(rows, USERS)) == [
        ("u1", "a", 1, 2, False, False),
        ("u1", "b", 2, 3, False, True),
    ]
    assert current_rows(rows, USERS).count() == 0
    # Before the delete, the current row is the update's first delivery.
    [row] = current_rows(changes_of(spark, [*first, *first[1:]]), USERS).collect()
    assert (row["segment"], row["lsn"], row["kafka_offset"]) == ("b", 20, 1)


def test_a_change_sent_again_after_its_key_was_deleted_brings_nothing_back(spark) -> None:
    records = [
        *create(user("u1", "a", 1), 10, committed=1),
        # An UPDATE that sets what is there: no version of its own, but applied.
        *update(user("u1", "a", 1), user("u1", "a", 1), 20, committed=2),
        *delete(user("u1", "a", 1), 30, committed=3),
    ]
    rows = changes_of(spark, records)
    history = history_rows(rows, USERS)
    assert versions(history) == [("u1", "a", 1, 3, False, True)]
    for again in (records[:1], records[1:2], records[:3]):
        late = changes_of(spark, again, first_offset=len(records))
        assert unapplied_changes(late, history, USERS).count() == 0
        assertDataFrameEqual(apply_history(history, late, USERS), history)


def test_applying_a_batch_again_changes_nothing(spark) -> None:
    records = [
        *create(user("u1", "a", 1), 10, committed=1),
        *create(user("u2", "a", 1), 11, committed=1),
        *update(user("u1", "a", 1), user("u1", "b", 2), 20, committed=2),
    ]
    rows = changes_of(spark, records)
    current = current_rows(rows, USERS)
    assertDataFrameEqual(apply_changes(current, rows, USERS), current)
    history = history_rows(rows, USERS)
    assertDataFrameEqual(apply_history(history, rows, USERS), history)
    # Delivered again later in the log: the rows keep their first delivery's offsets.
    again = changes_of(spark, records, first_offset=len(records))
    assertDataFrameEqual(apply_changes(current, again, USERS), current)
    assertDataFrameEqual(apply_history(history, again, USERS), history)


def test_a_primary_key_update_deletes_the_old_key_and_creates_the_new_one(spark) -> None:
    renamed = {**user("u1", "gold", 1), "user_id": "u9"}
    records = [
        *create(user("u1", "gold", 1), 10, committed=1),
        *create(user("u2"), 11, committed=1),
        # UPDATE users SET user_id = 'u9' WHERE user_id = 'u1': one WAL record.
        *delete(user("u1", "gold", 1), 20, tx=2, committed=4),
        *create(renamed, 20, tx=2, committed=4),
    ]
    rows = changes_of(spark, records)
    assert users(current_rows(rows, USERS)) == {"u2": ("new", 0), "u9": ("gold", 1)}
    assert versions(history_rows(rows, USERS)) == [
        ("u1", "gold", 1, 4, False, True),
        ("u2", "new", 0, None, True, False),
        ("u9", "gold", 1, None, True, False),
    ]
    for split in range(1, len(records)):
        before, after = (
            changes_of(spark, records[:split]),
            changes_of(spark, records[split:], split),
        )
        current = apply_changes(current_rows(before, USERS), after, USERS)
        assert users(current) == {"u2": ("new", 0), "u9": ("gold", 1)}, split


def test_a_key_deleted_and_inserted_again_has_a_deleted_version_and_a_current_one(spark) -> None:
    records = [
        *create(user("u1", "a", 1), 10, committed=1),
        *delete(user("u1", "a", 1), 20, committed=3),
        *create(user("u1", "a", 5), 30, committed=5),
    ]
    rows = changes_of(spark, records)
    assert users(current_rows(rows, USERS)) == {"u1": ("a", 5)}
    # The first version ends at the delete's commit time: a DELETE sets no updated_at.
    assert versions(history_rows(rows, USERS)) == [
        ("u1", "a", 1, 3, False, True),
        ("u1", "a", 5, None, True, False),
    ]
    [deleted] = history_rows(rows, USERS).where("deleted").collect()
    assert (deleted["lsn"], deleted["ended_lsn"]) == (10, 20)


def test_a_long_transaction_is_applied_in_its_own_order(spark) -> None:
    """One transaction, one commit time: LSN orders its changes, not arrival."""
    rows_in_tx = [
        create(user(f"u{i:03}", "bulk", 1), 1000 + i, tx=9, committed=2) for i in range(200)
    ]
    records = [r for change in rows_in_tx for r in change]
    twice = [
        *update(user("u000", "bulk", 1), user("u000", "last", 1.5), 1300, tx=9, committed=2),
        *update(user("u000", "bulk", 1), user("u000", "middle", 1.2), 1250, tx=9, committed=2),
    ]
    rows = changes_of(spark, [*records, *twice])
    assert rows.select("tx_id", "commit_time").distinct().count() == 1
    current = users(current_rows(rows, USERS))
    assert len(current) == 200 and current["u000"] == ("last", 1.5)
    history = history_rows(rows, USERS)
    assert history.count() == 202 and history.where("is_current").count() == 200
    assert versions(history.where("user_id = 'u000'")) == [
        ("u000", "bulk", 1, 1.2, False, False),
        ("u000", "middle", 1.2, 1.5, False, False),
        ("u000", "last", 1.5, None, True, False),
    ]


def test_the_outputs_have_the_registry_schemas(spark) -> None:
    records = [*create(user("u1"), 10), *delete(user("u1"), 11), ("x", "y")]
    parsed = raw(spark, records).transform(parse_changes)
    rows = accepted_changes(parsed).transform(typed_rows, USERS)
    for frame, name in [
        (accepted_changes(parsed), "bronze.users_changes"),
        (quarantined_changes(parsed), "bronze.cdc_quarantine"),
        (current_rows(rows, USERS), "silver.users_current"),
        (history_rows(rows, USERS), "silver.users_history"),
    ]:
        declared = [(f.name, f.dataType.simpleString()) for f in table(name).spark_schema()]
        assert [(f.name, f.dataType.simpleString()) for f in frame.schema] == declared, name


# The property: applied in batches cut anywhere, the changes give the tables they give at
# once, and those hold what the database held.


@dataclass
class Shop:
    """A users table changed at random, and the change records Debezium would send."""

    rng: random.Random
    rows: dict[str, dict] = field(default_factory=dict)
    records: list[Record] = field(default_factory=list)
    lsn: int = 100
    tx: int = 1
    minute: int = 0

    def snapshot(self, keys: list[str]) -> None:
        for key in keys:
            self.rows[key] = user(key, "snap", 0)
            self.records += read(self.rows[key], self.lsn)

    def step(self) -> None:
        self.lsn += self.rng.randint(1, 3)
        self.tx += 1
        self.minute += 1
        source = {"tx": self.tx, "committed": self.minute}
        free = [k for k in (f"u{i}" for i in range(6)) if k not in self.rows]
        live = sorted(self.rows)
        kind = self.rng.choice(["insert", "update", "update", "same", "delete", "rekey", "again"])
        if (kind == "insert" and free) or not live:
            row = user(self.rng.choice(free), self.rng.choice("abc"), self.minute)
            self.rows[row["user_id"]] = row
            self.records += create(row, self.lsn, **source)
        elif kind in ("update", "same"):
            old = self.rows[self.rng.choice(live)]
            new = old if kind == "same" else {**old, "segment": self.rng.choice("abc")}
            new = {**new, "updated_at": iso(self.minute)} if kind == "update" else new
            self.rows[old["user_id"]] = new
            self.records += update(old, new, self.lsn, **source)
        elif kind == "delete":
            old = self.rows.pop(self.rng.choice(live))
            self.records += delete(old, self.lsn, **source)
        elif kind == "rekey" and free:
            old = self.rows.pop(self.rng.choice(live))
            new = {**old, "user_id": self.rng.choice(free)}
            self.rows[new["user_id"]] = new
            self.records += [*delete(old, self.lsn, **source), *create(new, self.lsn, **source)]
        elif kind == "again":
            # A restarted connector: the last few records sent again, in their order.
            self.records += self.records[-self.rng.randint(1, 6) :]


def batches_of(spark, records: list[Record], cuts: list[int]):
    bounds = [0, *cuts, len(records)]
    for start, end in itertools.pairwise(bounds):
        yield changes_of(spark, records[start:end], start)


@pytest.mark.parametrize("seed", [3, 11, 2026])
def test_changes_applied_in_batches_cut_anywhere_equal_them_applied_at_once(spark, seed) -> None:
    rng = random.Random(seed)
    shop = Shop(rng)
    shop.snapshot(["u0", "u1", "u2"])
    for _ in range(30):
        shop.step()
    everything = changes_of(spark, shop.records)
    at_once_current = current_rows(everything, USERS).localCheckpoint()
    at_once_history = history_rows(everything, USERS).localCheckpoint()
    truth = {k: (r["segment"], int(r["updated_at"][14:16])) for k, r in shop.rows.items()}
    assert users(at_once_current) == truth

    cuts = sorted(rng.sample(range(1, len(shop.records)), 4))
    current, history = current_of(spark, []), rows_frame(spark, [], HISTORY)
    for batch in batches_of(spark, shop.records, cuts):
        fresh = unapplied_changes(batch, history, USERS)
        current = apply_changes(current, fresh, USERS).localCheckpoint()
        history = apply_history(history, batch, USERS).localCheckpoint()
    assertDataFrameEqual(current, at_once_current)
    assertDataFrameEqual(history, at_once_history)
