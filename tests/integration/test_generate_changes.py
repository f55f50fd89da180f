"""The change generator on the real PostgreSQL: `python -m jobs.generate_changes` commits every
planned change once, the tables end as the ledger says, and a bad argument or an unreachable
database changes nothing. Every row is under this run's own key prefix, deleted at the end."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from psycopg import sql

from jobs.contract import Exit, read_result
from lakehouse.core.config import CdcSettings, Settings
from lakehouse.generator.ledger import read_ledger
from lakehouse.generator.shop_changes import OPS, TABLE_COLUMNS, TABLE_KEYS, final_rows, json_row
from tests.conftest import RUN_ID
from tests.integration.cdc_capture import database
from tests.jobs_in_process import RunJob

JOB = "jobs.generate_changes"


@pytest.fixture(scope="module")
def cdc(minio_settings: Settings, postgres_up: str) -> CdcSettings:
    return minio_settings.cdc


def rows_under(cdc: CdcSettings, prefix: str) -> dict[tuple[str, str], dict[str, Any]]:
    """Every row whose key starts with `prefix`, as the ledger writes rows."""
    found = {}
    with database(cdc) as conn:
        for table, key in TABLE_KEYS.items():
            query = sql.SQL("SELECT {} FROM {} WHERE starts_with({}, %s)").format(
                sql.SQL(", ").join(map(sql.Identifier, TABLE_COLUMNS[table])),
                sql.Identifier(cdc.schema_name, table),
                sql.Identifier(key),
            )
            for values in conn.execute(query, (prefix,)):
                row = dict(zip(TABLE_COLUMNS[table], values, strict=True))
                found[(table, row[key])] = json_row(row)
    return found


@pytest.fixture
def prefix(cdc: CdcSettings) -> Iterator[str]:
    """A key prefix of this test's own (this run's id and the test's); its rows are deleted
    after it."""
    own = f"g{RUN_ID}{uuid.uuid4().hex[:6]}-"
    yield own
    with database(cdc) as conn:
        for table, key in TABLE_KEYS.items():
            conn.execute(
                sql.SQL("DELETE FROM {} WHERE starts_with({}, %s)").format(
                    sql.Identifier(cdc.schema_name, table), sql.Identifier(key)
                ),
                (own,),
            )


def generate(run_job_here: RunJob, prefix: str, ledger: Path, *argv: str) -> dict[str, Any]:
    ran = run_job_here(
        JOB, "--key-prefix", prefix, "--users", "5", "--products", "10", "--ledger", str(ledger),
        *argv,
    )  # fmt: skip
    assert ran.returncode == Exit.OK, ran.stderr
    result = read_result("generate_changes", ran.stdout.splitlines())
    assert result is not None, ran.stdout
    return result


def test_every_change_lands_once_and_the_tables_end_as_the_ledger_says(
    cdc: CdcSettings, prefix: str, run_job_here: RunJob, tmp_path: Path
) -> None:
    ledger = tmp_path / "changes.jsonl"
    result = generate(run_job_here, prefix, ledger, "--count", "300", "--seed", "5",
                      "--key-updates", "0.05")  # fmt: skip
    entries = read_ledger(ledger)
    assert result["applied"] == result["planned"] == len(entries) == 5 + 10 + 300
    assert result["transactions"] == len(entries)
    assert set(Counter(e["op"] for e in entries)) == set(OPS)
    # One transaction per change, committed in the ledger's order.
    assert len({e["txid"] for e in entries}) == len(entries)
    lsns = [e["lsn"] for e in entries]
    assert lsns == sorted(lsns) and len(set(lsns)) == len(lsns)
    expected = {where: row for where, row in final_rows(entries).items() if row is not None}
    assert rows_under(cdc, prefix) == expected

    # A second run continues the shop its rows are in: nothing collides, nothing is seeded
    # twice, and the tables still end as both ledgers say.
    again = tmp_path / "again.jsonl"
    generate(run_job_here, prefix, again, "--count", "100", "--seed", "6")
    both = entries + read_ledger(again)
    expected = {where: row for where, row in final_rows(both).items() if row is not None}
    assert rows_under(cdc, prefix) == expected


def test_one_long_transaction_touches_many_rows(
    cdc: CdcSettings, prefix: str, run_job_here: RunJob, tmp_path: Path
) -> None:
    ledger = tmp_path / "long.jsonl"
    result = generate(run_job_here, prefix, ledger, "--count", "200", "--seed", "7",
                      "--per-transaction", "1000")  # fmt: skip
    entries = read_ledger(ledger)
    assert result["transactions"] == 1 and len(entries) == 215
    assert len({e["txid"] for e in entries}) == 1
    assert len({(e["table"], e["key"]) for e in entries}) > 50
    expected = {where: row for where, row in final_rows(entries).items() if row is not None}
    assert rows_under(cdc, prefix) == expected


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--count", "10", "--deletes", "-1"], "the share of deletes must be a finite number"),
        (["--count", "0"], "--count: must be at least 1"),
        (["--count", "10", "--rate", "fast"], "--rate: 'fast' is not a number"),
        (["--count", "10", "--users", "10000"], "users must be from 1 to 9999"),
    ],
)
def test_a_bad_argument_changes_nothing(
    cdc: CdcSettings,
    prefix: str,
    run_job_here: RunJob,
    tmp_path: Path,
    argv: list[str],
    said: str,
) -> None:
    ledger = tmp_path / "refused.jsonl"
    ran = run_job_here(JOB, "--key-prefix", prefix, "--ledger", str(ledger), *argv)
    assert ran.returncode == Exit.BAD_REQUEST
    assert said in ran.stderr and len(ran.stderr.strip().splitlines()) == 1, ran.stderr
    assert not ledger.exists()
    assert rows_under(cdc, prefix) == {}


def test_an_unreachable_database_says_to_start_it_and_changes_nothing(
    prefix: str, run_job_here: RunJob, tmp_path: Path
) -> None:
    ledger = tmp_path / "never.jsonl"
    ran = run_job_here(
        JOB, "--count", "10", "--key-prefix", prefix, "--ledger", str(ledger),
        TRIBUTARY__CDC__DATABASE_PORT="1",
    )  # fmt: skip
    assert ran.returncode == Exit.CANNOT_RUN
    assert "PostgreSQL is not reachable at" in ran.stderr and "`make up`" in ran.stderr
    assert not ledger.exists()
