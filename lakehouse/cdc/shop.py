"""The captured shop tables as the lakehouse sees them: key, columns and business clock.

One entry per PostgreSQL table Debezium captures (the `shop` schema the services create). The
table registry (lakehouse.core.tables) builds each table's bronze, current and history schemas
from it, and the change transforms (lakehouse.transforms.changes) parse and key the row images
by it, so a column is named and typed here once. Debezium sends `numeric` as a string
(decimal.handling.mode=string) and `timestamptz` as ISO-8601 text with a zone; the Spark type
below is what the text is cast to.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lakehouse.core.config import CdcSettings


class UnknownCapturedTableError(KeyError):
    def __str__(self) -> str:
        return (
            f"unknown captured table {self.args[0]!r}; "
            f"captured tables: {', '.join(sorted(CAPTURED))}"
        )


@dataclass(frozen=True)
class CapturedTable:
    name: str  # the PostgreSQL table, in the captured schema
    key: tuple[str, ...]  # its primary key's columns: the Kafka key Debezium sends
    columns: tuple[tuple[str, str], ...]  # (column, Spark SQL type), in the table's order
    # The business clock: the column the application sets on every insert and update. A
    # version of the row is valid from it (lakehouse.transforms.changes.history_rows).
    clock: str = "updated_at"

    def __post_init__(self) -> None:
        names = self.column_names
        if not self.key or not set(self.key) <= set(names) or self.clock not in names:
            raise ValueError(f"{self.name}: key {self.key} and clock {self.clock} are columns")

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.columns)

    @property
    def ddl(self) -> str:
        """The typed columns as Spark DDL: "user_id string, ..."."""
        return ", ".join(f"{name} {kind}" for name, kind in self.columns)

    def topic(self, cdc: CdcSettings) -> str:
        """The changelog topic Debezium writes: <topic_prefix>.<schema>.<table>."""
        return f"{cdc.topic_prefix}.{cdc.schema_name}.{self.name}"


USERS = CapturedTable(
    "users",
    key=("user_id",),
    columns=(
        ("user_id", "string"),
        ("segment", "string"),
        ("country", "string"),
        ("updated_at", "timestamp"),
    ),
)
PRODUCTS = CapturedTable(
    "products",
    key=("product_id",),
    columns=(
        ("product_id", "string"),
        ("name", "string"),
        ("category", "string"),
        ("price", "decimal(10,2)"),
        ("updated_at", "timestamp"),
    ),
)
ORDERS = CapturedTable(
    "orders",
    key=("order_id",),
    columns=(
        ("order_id", "string"),
        ("user_id", "string"),
        ("status", "string"),
        ("total", "decimal(12,2)"),
        ("updated_at", "timestamp"),
    ),
)

CAPTURED: dict[str, CapturedTable] = {t.name: t for t in (USERS, PRODUCTS, ORDERS)}


def captured(name: str) -> CapturedTable:
    try:
        return CAPTURED[name]
    except KeyError:
        raise UnknownCapturedTableError(name) from None
