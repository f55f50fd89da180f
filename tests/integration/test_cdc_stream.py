"""The whole change data capture path on the real services: the change generator commits to
PostgreSQL, Debezium publishes to the changelog topics, the changelog stream (jobs.cdc) applies
them, and every change is there once: silver.<t>_current as the ledger ends, one history
version per change that changed a row, bronze.<t>_changes every change once by LSN, the
progress rows adding up, silver.user_orders the join of the current tables after every run
(an order moved to another user by hand included), and a record that cannot be parsed
quarantined while the stream goes on. Each test captures through a connector of its own
(tests/integration/cdc_capture.py)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from jobs.contract import Exit
from lakehouse.cdc.changelog import QUARANTINE, changes_table, current_table
from lakehouse.cdc.shop import CAPTURED, ORDERS, USERS
from lakehouse.cdc.user_orders import VIEW
from lakehouse.core.config import CdcSettings, Settings
from lakehouse.core.events import REASON_MALFORMED
from lakehouse.core.kafka_io import produce_records
from lakehouse.generator.shop_changes import UPDATE, final_rows, json_row
from lakehouse.transforms.changes import REASON_MISSING_SOURCE
from tests.integration.cdc_capture import (
    assert_progress_adds_up,
    assert_tables_as_the_ledger_says,
    current_under,
    database,
    generate,
    history_under,
    job_env,
    ledger_current,
    new_key_prefix,
    own_capture,
    settings_of,
    table_rows,
    wait_until_published,
)
from tests.jobs_in_process import RunJob


@pytest.fixture
def prefix() -> str:
    return new_key_prefix()


@pytest.fixture
def capture(minio_settings: Settings, connect_up: str, prefix: str) -> Iterator[CdcSettings]:
    with own_capture(minio_settings.cdc, prefix) as own:
        yield own


def run_stream(run_job_here: RunJob, env: dict[str, str], lake: Path) -> None:
    """jobs.cdc --available-now in this process: what the topics hold, then exit."""
    stop_file = str(lake.parent / "cdc.stop")
    ran = run_job_here("jobs.cdc", "--available-now", "--stop-file", stop_file, **env)
    assert ran.returncode == Exit.OK, ran.stderr[-3000:]


def expected_view(users: Sequence[Mapping[str, Any]], orders: Sequence[Mapping[str, Any]]):
    """user_id -> (segment, country, orders, spend) by the view's rules (docs/joins.md),
    written again here in Python over plain rows: an order of no current user is in no row,
    a cancelled one counts but does not spend."""
    view = {u["user_id"]: [u["segment"], u["country"], 0, Decimal(0)] for u in users}
    for order in orders:
        row = view.get(order["user_id"])
        if row is not None:
            row[2] += 1
            row[3] += Decimal(order["total"]) if order["status"] != "cancelled" else 0
    return {user: tuple(row) for user, row in view.items()}


def view_rows(settings: Settings) -> dict[str, tuple]:
    return {
        r["user_id"]: (r["segment"], r["country"], r["orders"], r["spend"])
        for r in table_rows(settings, VIEW)
    }


def assert_view_is_the_join(settings: Settings, prefix: str, entries: list) -> None:
    """silver.user_orders is the join of the stream's current tables, every row (the capture
    holds rows other tests left in the shop too), and its rows of this test's users are what
    the ledger's own rows make."""
    users = table_rows(settings, current_table(USERS))
    orders = table_rows(settings, current_table(ORDERS))
    found = view_rows(settings)
    assert found == expected_view(users, orders)
    rows = final_rows(entries).items()
    ledger_users = [row for (t, _), row in rows if t == "users" and row]
    ledger_orders = [row for (t, _), row in rows if t == "orders" and row]
    mine = {u: row for u, row in found.items() if u.startswith(prefix)}
    assert mine == expected_view(ledger_users, ledger_orders)
    assert any(row[2] > 0 for row in mine.values()), "some user of the test has orders"


def test_generated_changes_flow_to_current_history_and_bronze_once_each(
    minio_settings: Settings,
    capture: CdcSettings,
    prefix: str,
    run_job_here: RunJob,
    tmp_path: Path,
) -> None:
    """Single changes with primary-key updates, then one long transaction over many rows, then
    an UPDATE by hand after the stream has run (the demo's story): a restart continues."""
    entries = generate(capture, prefix, tmp_path / "single.jsonl", 150, seed=31, key_updates=0.05)
    assert any(e.get("old_key") for e in entries), "a primary key update is among the changes"
    long = generate(capture, prefix, tmp_path / "long.jsonl", 120, seed=32, per_transaction=1000)
    assert len({e["txid"] for e in long}) == 1 and len({e["key"] for e in long}) > 30
    entries += long
    wait_until_published(minio_settings, capture, prefix, entries)

    lake = tmp_path / "lake"
    env = job_env(lake, capture)
    settings = settings_of(env)
    run_stream(run_job_here, env, lake)

    bronze = assert_tables_as_the_ledger_says(settings, prefix, entries)
    assert all(received == distinct for received, distinct, _ in bronze.values()), (
        f"no fault, so no change delivered twice: {bronze}"
    )
    assert table_rows(settings, QUARANTINE) == []
    assert_progress_adds_up(settings, capture)
    assert_view_is_the_join(settings, prefix, entries)

    # An UPDATE by hand flows to the current row and opens a version.
    user = next(key for table, key in ledger_current(entries) if table == "users")
    with database(capture) as db:
        row = db.execute(
            "UPDATE users SET segment = 'hand-made', updated_at = now() WHERE user_id = %s "
            "RETURNING user_id, segment, country, updated_at",
            (user,),
        ).fetchone()
    assert row is not None
    hand = dict(zip(("user_id", "segment", "country", "updated_at"), row, strict=True))
    entries.append({"table": "users", "op": UPDATE, "key": user, "row": json_row(hand)})
    # An order moved by hand to another user changes both users' rows of the view.
    current = ledger_current(entries)
    order = next(row for (t, _), row in current.items() if t == "orders" and row["user_id"] != user)
    assert ("users", order["user_id"]) in current, "the order's user is current"
    with database(capture) as db:
        moved = db.execute(
            "UPDATE orders SET user_id = %s, updated_at = now() WHERE order_id = %s "
            "RETURNING order_id, user_id, status, total, updated_at",
            (user, order["order_id"]),
        ).fetchone()
    assert moved is not None
    columns = ("order_id", "user_id", "status", "total", "updated_at")
    moved_row = json_row(dict(zip(columns, moved, strict=True)))
    entries.append({"table": "orders", "op": UPDATE, "key": order["order_id"], "row": moved_row})
    counts_before = {u: row[2] for u, row in view_rows(settings).items()}
    wait_until_published(minio_settings, capture, prefix, entries)
    run_stream(run_job_here, env, lake)

    assert current_under(settings, prefix)[("users", user)]["segment"] == "hand-made"
    *_, ended, opened = history_under(settings, prefix)[("users", user)]
    assert opened["segment"] == "hand-made" and opened["is_current"]
    assert not ended["is_current"] and not ended["deleted"]
    assert_tables_as_the_ledger_says(settings, prefix, entries)
    assert_progress_adds_up(settings, capture)
    assert_view_is_the_join(settings, prefix, entries)
    counts_after = {u: row[2] for u, row in view_rows(settings).items()}
    assert counts_after[user] == counts_before[user] + 1
    assert counts_after[order["user_id"]] == counts_before[order["user_id"]] - 1
    assert view_rows(settings)[user][0] == "hand-made"


def test_a_record_that_cannot_be_parsed_is_quarantined_and_the_stream_goes_on(
    minio_settings: Settings,
    capture: CdcSettings,
    prefix: str,
    run_job_here: RunJob,
    tmp_path: Path,
) -> None:
    before = generate(capture, prefix, tmp_path / "before.jsonl", 20, seed=41)
    wait_until_published(minio_settings, capture, prefix, before)
    topic = capture.topic("users")
    key = f'{{"user_id": "{prefix}u9999"}}'.encode()
    bad = [
        (key, b'{"op": "u", "after": {"user_id": '),  # cut short: not JSON
        (key, b'{"op": "u", "before": null, "after": null}'),  # no source, no row
    ]
    sent = list(produce_records(minio_settings, bad, topic=topic))
    after = generate(capture, prefix, tmp_path / "after.jsonl", 40, seed=42)
    entries = before + after
    wait_until_published(minio_settings, capture, prefix, entries)

    lake = tmp_path / "lake"
    env = job_env(lake, capture)
    settings = settings_of(env)
    run_stream(run_job_here, env, lake)

    quarantined = sorted(table_rows(settings, QUARANTINE), key=lambda r: r["kafka_offset"])
    assert [(r["topic"], r["kafka_offset"]) for r in quarantined] == [
        (topic, m.offset) for m in sent
    ]
    assert quarantined[0]["reasons"] == [REASON_MALFORMED]
    assert REASON_MISSING_SOURCE in quarantined[1]["reasons"]
    assert [r["value"] for r in quarantined] == [value for _, value in bad], "as received"
    # The changes committed after the bad records are applied: the tables end as the ledger.
    assert_tables_as_the_ledger_says(settings, prefix, entries)
    users = table_rows(settings, changes_table(CAPTURED["users"]))
    assert any(r["offset"] > sent[-1].offset for r in users), "changes after them applied"
    assert_progress_adds_up(settings, capture, quarantined=len(bad))
