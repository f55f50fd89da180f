"""The table registry: every Delta table, where it lives and which job may write it.

Jobs ask for a table by name (`table("bronze.events_raw")`) and get its location from the
configured storage root; no job contains a path. `writer` names the one Spark application
allowed to write the table (DESIGN.md, invariant 5).
"""

from __future__ import annotations

from dataclasses import dataclass

from lakehouse.config import Settings, get_settings


class UnknownTableError(KeyError):
    def __str__(self) -> str:
        return f"unknown table {self.args[0]!r}; known tables: {', '.join(sorted(TABLES))}"


@dataclass(frozen=True)
class Table:
    name: str  # "<stage>.<table>"
    writer: str  # the job (module under jobs/) that owns writes
    description: str
    partition_by: tuple[str, ...] = ()

    @property
    def stage(self) -> str:
        return self.name.split(".", 1)[0]

    def path(self, settings: Settings | None = None) -> str:
        root = (settings or get_settings()).storage.root
        return f"{root}/{self.name.replace('.', '/')}"

    def checkpoint(self, query: str, settings: Settings | None = None) -> str:
        root = (settings or get_settings()).storage.checkpoints
        return f"{root}/{self.writer}/{query}"


TABLES: dict[str, Table] = {
    t.name: t
    for t in (
        Table(
            name="bronze.events_raw",
            writer="demo",
            description="Every Kafka record as received: key, value and Kafka coordinates",
        ),
    )
}


def table(name: str) -> Table:
    try:
        return TABLES[name]
    except KeyError:
        raise UnknownTableError(name) from None
