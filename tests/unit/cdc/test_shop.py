"""The captured tables as the lakehouse declares them are the tables the database has, and
the ones the connector captures."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from lakehouse.cdc.shop import CAPTURED, USERS, CapturedTable, captured
from lakehouse.core.config import load_settings

SHOP_SQL = Path(__file__).parents[3] / "infra" / "postgres" / "shop.sql"
# What Debezium's JSON (decimals as strings, timestamptz as ISO text) is cast to.
SPARK_TYPE = {"text": "string", "timestamptz": "timestamp"}


COLUMN = re.compile(r"^\s*(\w+)\s+(numeric\((\d+),\s*(\d+)\)|\w+)(.*)$")


def database_tables() -> dict[str, tuple[tuple[str, ...], tuple[tuple[str, str], ...]]]:
    """Table -> (primary key, (column, Spark type)...) as infra/postgres/shop.sql creates it."""
    found = {}
    created = re.findall(
        r"CREATE TABLE IF NOT EXISTS (\w+) \((.*?)\n\);", SHOP_SQL.read_text(), re.S
    )
    for name, body in created:
        columns, key = [], []
        for line in body.strip().splitlines():
            column, kind, precision, scale, rest = COLUMN.match(line).groups()
            spark = f"decimal({precision},{scale})" if precision else SPARK_TYPE[kind]
            columns.append((column, spark))
            if "PRIMARY KEY" in rest:
                key.append(column)
        found[name] = (tuple(key), tuple(columns))
    return found


def test_every_captured_table_has_the_database_tables_key_and_columns() -> None:
    declared = {t.name: (t.key, t.columns) for t in CAPTURED.values()}
    assert declared == database_tables()


def test_the_captured_tables_are_the_ones_the_connector_captures(tmp_path: Path) -> None:
    cdc = load_settings(environ={"TRIBUTARY_CACHE": str(tmp_path / "cache")}).cdc
    assert sorted(cdc.tables) == sorted(CAPTURED)
    assert USERS.topic(cdc) == f"{cdc.topic_prefix}.{cdc.schema_name}.users"


def test_a_table_without_its_key_or_clock_among_its_columns_is_refused() -> None:
    with pytest.raises(ValueError, match="are columns"):
        CapturedTable("t", key=("id",), columns=(("other", "string"), ("updated_at", "timestamp")))
    with pytest.raises(ValueError, match="are columns"):
        CapturedTable("t", key=("id",), columns=(("id", "string"),))
    with pytest.raises(KeyError, match="captured tables: orders, products, users"):
        captured("carts")
