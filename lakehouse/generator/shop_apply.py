"""Applying the shop change generator's plan (lakehouse.generator.shop_changes) to PostgreSQL:
`apply_changes` commits the planned changes at a given rate and writes the ledger, one JSON
line per committed change; `read_shop` reads the rows a plan starts from."""

from __future__ import annotations

import json
import math
import threading
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lakehouse.cdc import database as shop_database
from lakehouse.cdc.database import ShopUnavailableError, first_line
from lakehouse.core.paths import state_dir
from lakehouse.generator.clickstream import ledger_problem
from lakehouse.generator.ledger import sleep_until
from lakehouse.generator.shop_changes import (
    DELETE,
    INSERT,
    KEY_UPDATE,
    OPS,
    SEED_PRODUCT,
    SEED_USER,
    TABLE_COLUMNS,
    TABLE_KEYS,
    TABLES,
    Change,
    ChangeConfig,
    Shop,
    empty_shop,
    json_value,
    plan_changes,
    planned_count,
)

if TYPE_CHECKING:
    import psycopg

    from lakehouse.core.config import CdcSettings


class ChangeApplyError(Exception):
    """Applying stopped part-way: the changes committed before are in the ledger."""


# A key of the generator's own shape: the prefix, the table's letter, digits. Rows of other
# shapes (another prefix's, a test's, a hand-made one) are never read, changed or deleted.
KEY_LETTERS = {"users": "u", "products": "p", "orders": "o"}
APPLICATION_NAME = "tributary-change-generator"


def connect(cdc: CdcSettings) -> psycopg.Connection[tuple[Any, ...]]:
    """A connection to the shop database as the `cdc` settings name it, in UTC."""
    return shop_database.connect(cdc, application_name=APPLICATION_NAME)


def read_shop(conn: psycopg.Connection[Any], schema: str, key_prefix: str = "") -> Shop:
    """The rows of the shop tables under the generator's keys with `key_prefix`."""
    from psycopg import sql
    from psycopg.rows import dict_row

    shop = empty_shop()
    with conn.cursor(row_factory=dict_row) as cur:
        for table, key in TABLE_KEYS.items():
            query = sql.SQL("SELECT {columns} FROM {table} WHERE {key} ~ %s").format(
                columns=sql.SQL(", ").join(map(sql.Identifier, TABLE_COLUMNS[table])),
                table=sql.Identifier(schema, table),
                key=sql.Identifier(key),
            )
            cur.execute(query, (f"^{key_prefix}{KEY_LETTERS[table]}[0-9]+$",))
            shop[table] = {row[key]: row for row in cur.fetchall()}
    conn.commit()  # the read's transaction ends here: changes start transactions of their own
    return shop


def change_statement(change: Change, schema: str) -> tuple[Any, tuple[Any, ...]]:
    """The SQL of one change and its parameters."""
    from psycopg import sql

    table = sql.Identifier(schema, change.table)
    key_column = sql.Identifier(TABLE_KEYS[change.table])
    if change.op == DELETE:
        return sql.SQL("DELETE FROM {} WHERE {} = %s").format(table, key_column), (change.key,)
    assert change.row is not None
    columns = TABLE_COLUMNS[change.table]
    values = tuple(change.row[name] for name in columns)
    if change.op == INSERT:
        query = sql.SQL("INSERT INTO {} ({}) VALUES ({})").format(
            table,
            sql.SQL(", ").join(map(sql.Identifier, columns)),
            sql.SQL(", ").join(sql.Placeholder() * len(columns)),
        )
        return query, values
    # An update sets the whole row after it; a primary-key update sets the key too.
    where = change.old_key if change.op == KEY_UPDATE else change.key
    query = sql.SQL("UPDATE {} SET {} WHERE {} = %s").format(
        table,
        sql.SQL(", ").join(sql.SQL("{} = %s").format(sql.Identifier(name)) for name in columns),
        key_column,
    )
    return query, (*values, where)


# The WAL insert position just after a change's statement (at or after the change's own WAL
# record, before its commit's) and the transaction's 32-bit xid, which Debezium sends as
# source.txId.
POSITION_QUERY = "SELECT pg_current_wal_insert_lsn()::text, txid_current() % 4294967296"


def lsn_number(text: str) -> int:
    """'16/B374D848' -> the LSN as the 64-bit number Debezium sends as source.lsn."""
    high, _, low = text.partition("/")
    return (int(high, 16) << 32) + int(low, 16)


def apply_changes(
    cdc: CdcSettings,
    cfg: ChangeConfig,
    ledger_path: str | Path,
    rate: float | None = None,
    per_transaction: int = 1,
    progress_every: float = 5.0,
    stop: threading.Event | None = None,
) -> dict[str, Any]:
    """Commit the changes of `cfg` to the shop database and write the ledger; a summary.

    `rate` paces the changes (per second of wall-clock time; None: as fast as PostgreSQL
    takes them). Each transaction holds `per_transaction` changes (1: one transaction per
    change). The ledger gets one JSON line per committed change, in commit order, written once
    its transaction commits, with its LSN, transaction id and commit time. Setting `stop` ends
    the run cleanly after the change in hand: what was applied is committed and in the ledger.
    """
    if rate is not None and not (rate > 0 and math.isfinite(rate)):
        raise ValueError(f"rate must be > 0 changes/s and finite, got {rate:g}")
    if per_transaction < 1:
        raise ValueError(f"per_transaction must be >= 1, got {per_transaction}")
    path = Path(ledger_path)
    problem = ledger_problem(path)
    if problem:
        raise ValueError(problem)
    import psycopg

    stopping = stop or threading.Event()
    with connect(cdc) as conn:
        try:
            existing = read_shop(conn, cdc.schema_name, cfg.key_prefix)
        except psycopg.Error as err:
            raise ShopUnavailableError(
                f"cannot read the shop tables in {cdc.database}.{cdc.schema_name}: "
                f"{first_line(err)}; `make up` creates them"
            ) from None
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w") as ledger:
            run = _Run(conn, cdc.schema_name, ledger, planned_count(cfg, existing))
            run.apply(plan_changes(cfg, existing), rate, per_transaction, progress_every, stopping)
    return run.summary(str(path), stopped=stopping.is_set())


class _Run:
    """One run's connection, ledger and counts."""

    def __init__(self, conn: psycopg.Connection[Any], schema: str, ledger: Any, planned: int):
        self.conn, self.schema, self.ledger, self.planned = conn, schema, ledger, planned
        self.ops: Counter[str] = Counter()
        self.tables: Counter[str] = Counter()
        self.changes: Counter[str] = Counter()
        self.transactions = 0
        self.lsns: list[int] = []
        self.started = time.monotonic()

    def apply(
        self,
        changes: Iterator[Change],
        rate: float | None,
        per_transaction: int,
        progress_every: float,
        stop: threading.Event,
    ) -> None:
        import psycopg

        pending: list[dict[str, Any]] = []
        report_at = self.started + progress_every
        try:
            with self.conn.cursor() as cur:
                for number, change in enumerate(changes):
                    if rate is not None:
                        sleep_until(self.started + number / rate, stop)
                    if stop.is_set():
                        break
                    pending.append(self._execute(cur, change))
                    if len(pending) >= per_transaction:
                        self._commit(pending)
                    if time.monotonic() >= report_at:
                        report_at = time.monotonic() + progress_every
                        self._print_progress()
                self._commit(pending)
        except (psycopg.Error, ChangeApplyError) as err:
            if not self.conn.closed:
                self.conn.rollback()
            raise ChangeApplyError(
                f"applying stopped after {self.ops.total()} committed changes "
                f"(in the ledger {self.ledger.name}); {len(pending)} uncommitted were rolled "
                f"back: {first_line(err)}"
            ) from None

    def _execute(self, cur: psycopg.Cursor[Any], change: Change) -> dict[str, Any]:
        query, params = change_statement(change, self.schema)
        cur.execute(query, params)
        if cur.rowcount != 1:
            raise ChangeApplyError(
                f"{change.op} of {change.table} {change.old_key or change.key} found no row: "
                "another writer changed the generator's rows; run one generator per key "
                "prefix (--key-prefix)"
            )
        lsn, txid = cur.execute(POSITION_QUERY).fetchone() or ("0/0", 0)
        return change.ledger_entry() | {"lsn": lsn_number(lsn), "txid": int(txid)}

    def _commit(self, pending: list[dict[str, Any]]) -> None:
        if not pending:
            return
        self.conn.commit()
        committed_at = json_value(datetime.now(UTC))
        for entry in pending:
            entry["committed_at"] = committed_at
            self.ledger.write(json.dumps(entry) + "\n")
            self.ops[entry["op"]] += 1
            self.tables[entry["table"]] += 1
            self.changes[entry["change"]] += 1
            self.lsns.append(entry["lsn"])
        self.ledger.flush()
        self.transactions += 1
        pending.clear()

    def _print_progress(self) -> None:
        applied, seconds = self.ops.total(), time.monotonic() - self.started
        print(
            f"    applied {applied}/{self.planned} changes, {applied / seconds:,.1f} changes/s",
            flush=True,
        )

    def summary(self, ledger: str, stopped: bool) -> dict[str, Any]:
        seconds = time.monotonic() - self.started
        applied = self.ops.total()
        return {
            "applied": applied,
            "planned": self.planned,
            "seeded": self.changes[SEED_USER] + self.changes[SEED_PRODUCT],
            "transactions": self.transactions,
            "seconds": round(seconds, 3),
            "changes_per_second": round(applied / seconds, 1) if seconds > 0 else None,
            "ops": {op: self.ops[op] for op in OPS},
            "tables": {table: self.tables[table] for table in TABLES},
            "first_lsn": min(self.lsns, default=None),
            "last_lsn": max(self.lsns, default=None),
            "stopped_early": stopped and applied < self.planned,
            "ledger": ledger,
        }


def summary_lines(summary: Mapping[str, Any]) -> list[str]:
    """What `apply_changes` committed, for a terminal or a task log."""
    rate = summary["changes_per_second"] or 0
    lines = [
        f"==> applied {summary['applied']}/{summary['planned']} changes "
        f"({summary['seeded']} seed rows) in {summary['transactions']} transactions, "
        f"{summary['seconds']:.1f}s ({rate:,.1f} changes/s)",
        "    ops:    " + " ".join(f"{op}={n}" for op, n in summary["ops"].items() if n),
        "    tables: " + " ".join(f"{t}={n}" for t, n in summary["tables"].items()),
        f"    ledger: {summary['ledger']}",
    ]
    if summary["stopped_early"]:
        lines.append("    stopped early by a signal; the ledger lists every change committed")
    return lines


def default_ledger(seed: int) -> Path:
    """Where a run's ledger goes unless told: the state folder's ledgers/, by time and seed."""
    moment = f"{datetime.now(UTC):%Y%m%dT%H%M%SZ}"
    return state_dir() / "ledgers" / f"{moment}-changes-seed{seed}.jsonl"
