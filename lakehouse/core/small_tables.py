"""Small tables without Spark: delta-rs, in the process that asks.

The control plane's listings and refusals (the replay versions, the serving pointer) read a
few hundred rows. Starting a SparkSession for them takes 15-20 s; delta-rs answers in well
under a second, with the same rows Spark reads (both read the table's latest snapshot).

A stream's few-row appends (a progress row, a view's partial rows) are committed here too
(`append_marked`): Spark plans a write and rebuilds the table's state to commit it, about 0.3 s
of the driver's time for one row, where delta-rs takes a few hundredths. The commit is the
one Spark would make: same schema, partitions and batch mark, readable by both.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from lakehouse.core.delta_io import batch_mark, delta_rs_location

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.compute as pc
    from deltalake import DeltaTable

    from lakehouse.core.config import Settings
    from lakehouse.core.tables import Table


def table_rows(
    settings: Settings, table: Table, where: pc.Expression | None = None, version: int | None = None
) -> list[dict[str, Any]]:
    """Every row of `table` (that `where` keeps; at `version`, by default the latest) as a dict,
    as Spark's Row.asDict(recursive=True) gives it (maps as dicts, timestamps as aware UTC
    datetimes), without its layout columns; [] while the table does not exist."""
    delta = _opened(settings, table)
    if delta is not None and version is not None:
        delta.load_as_version(version)
    if delta is None:
        return []
    arrow = delta.to_pyarrow_dataset().to_table(filter=where)
    arrow = arrow.drop_columns([n for n in table.layout_names if n in arrow.column_names])
    return [
        {name: _python(row[name], arrow.schema.field(name).type) for name in arrow.column_names}
        for row in arrow.to_pylist()
    ]


def table_arrow(settings: Settings, table: Table, version: int) -> pa.Table | None:
    """The table's rows at `version` as one Arrow table in its declared columns (no layout
    column), as Spark reads them; None when delta-rs cannot read it there (no such version, or
    a table feature it does not read): the caller reads it through Spark then."""
    from deltalake.exceptions import DeltaError

    delta = _opened(settings, table)
    if delta is None:
        return None
    try:
        delta.load_as_version(version)
        found = delta.to_pyarrow_dataset().to_table()
    except DeltaError:
        return None
    names = table.spark_schema().fieldNames()
    return found.select(names) if set(names) <= set(found.column_names) else None


def rows_within(
    settings: Settings, table: Table, where: pc.Expression | None, max_rows: int
) -> pa.Table | None:
    """The latest snapshot's rows of `table` that `where` keeps, in its declared columns, when
    the files that may hold them hold at most `max_rows` rows: delta-rs skips a file by its
    partition values and statistics, as Spark does, and its add action counts its rows. None
    when they hold more, a file has no row count, the table does not exist or delta-rs cannot
    read it: the caller reads them through Spark then."""
    import pyarrow as pa
    from deltalake.exceptions import DeltaError

    delta = _opened(settings, table)
    if delta is None:
        return None
    try:
        actions = pa.table(delta.get_add_actions(flatten=True))
        dataset = delta.to_pyarrow_dataset()
    except DeltaError:
        return None
    counts = dict(zip(actions["path"].to_pylist(), actions["num_records"].to_pylist(), strict=True))
    held = [counts.get(f.path) for f in dataset.get_fragments(filter=where)]
    if None in held or sum(c for c in held if c is not None) > max_rows:
        return None
    found = dataset.to_table(filter=where)
    names = table.spark_schema().fieldNames()
    return found.select(names) if set(names) <= set(found.column_names) else None


def _python(value: Any, kind: pa.DataType) -> Any:
    """A value from Arrow's to_pylist with its maps (lists of pairs there) as dicts."""
    import pyarrow as pa

    if value is None:
        return None
    if pa.types.is_map(kind):
        return {k: _python(v, kind.item_type) for k, v in value}
    if pa.types.is_struct(kind):
        return {f.name: _python(value[f.name], f.type) for f in kind}
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return [_python(v, kind.value_type) for v in value]
    return value


def column_values(
    settings: Settings, table: Table, column: str, where: pc.Expression | None = None
) -> set[Any]:
    """The distinct values of one column of `table`, in the rows `where` keeps (empty while
    it does not exist)."""
    import pyarrow.compute as pc

    delta = _opened(settings, table)
    if delta is None:
        return set()
    found = delta.to_pyarrow_dataset().to_table(columns=[column], filter=where).column(column)
    return set(pc.unique(found).to_pylist())


def table_version(settings: Settings, table: Table) -> int | None:
    """The table's latest Delta version (the one Spark reads too), or None while it does not
    exist."""
    delta = _opened(settings, table)
    return None if delta is None else int(delta.version())


def has_rows(settings: Settings, table: Table) -> bool:
    """Whether the table exists and holds a row, from its files' statistics (the files
    themselves read only when a file has none)."""
    import pyarrow as pa

    delta = _opened(settings, table)
    if delta is None:
        return False
    counts = pa.table(delta.get_add_actions(flatten=True))["num_records"].to_pylist()
    if any(counts):
        return True
    if all(c is not None for c in counts):
        return False
    return bool(delta.to_pyarrow_dataset().count_rows())


def _opened(settings: Settings, table: Table) -> DeltaTable | None:
    """The table's latest snapshot in delta-rs, or None while it does not exist."""
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    uri, options = delta_rs_location(settings, table.path(settings))
    try:
        return DeltaTable(uri, storage_options=options)
    except TableNotFoundError:
        return None


def append_marked(
    settings: Settings,
    table: Table,
    rows: Callable[[tuple[str, ...]], pa.Table],
    app_id: str,
    batch_id: int,
) -> bool:
    """Append `rows(partition columns)` to `table` in one delta-rs commit marked with
    (app_id, batch_id), as delta_io.append_batch marks Spark's. False, with nothing written,
    while the table does not exist or its columns are not the rows' (an older table a Spark
    append widens): the caller appends through Spark then."""
    from deltalake import CommitProperties, write_deltalake

    delta = _opened(settings, table)
    given = None if delta is None else _as_stored(delta, rows)
    if delta is None or given is None:
        return False
    write_deltalake(
        delta,
        given,
        mode="append",
        commit_properties=CommitProperties(
            custom_metadata={"userMetadata": batch_mark(app_id, batch_id)}
        ),
    )
    return True


def compact(settings: Settings, table: Table, small_file_bytes: int) -> bool:
    """Rewrite the table's files smaller than `small_file_bytes` into files of up to that size,
    partition by partition, in one delta-rs commit that changes files, never rows (Delta's
    OPTIMIZE; a stream reading the table skips it). A file at the bound or above is never
    read, and one that could only be rewritten alone is left as it is. False, with nothing
    committed, while the table does not exist or when delta-rs cannot do it (a table feature
    it does not write, such as column mapping): the caller compacts through Spark then."""
    from deltalake.exceptions import DeltaError

    delta = _opened(settings, table)
    if delta is None:
        return False
    try:
        delta.optimize.compact(target_size=small_file_bytes)
    except DeltaError:
        return False
    return True


def replace_where(
    settings: Settings, table: Table, rows: Callable[[tuple[str, ...]], pa.Table], predicate: str
) -> bool:
    """Replace the rows of `table` that `predicate` (SQL over its partition columns) matches by
    `rows(partition columns)`, in one delta-rs commit: Spark's overwrite with replaceWhere.
    False, with nothing committed, while the table does not exist, its columns are not the
    rows', or delta-rs cannot write it: the caller writes through Spark then."""
    from deltalake import write_deltalake
    from deltalake.exceptions import DeltaError

    delta = _opened(settings, table)
    given = None if delta is None else _as_stored(delta, rows)
    if delta is None or given is None:
        return False
    try:
        write_deltalake(delta, given, mode="overwrite", predicate=predicate)
    except DeltaError:
        return False
    return True


# A partition as its (column, value) pairs, the values as the log writes them (text).
Partition = tuple[tuple[str, str], ...]


def crowded_partitions(settings: Settings, table: Table) -> tuple[list[Partition], pa.Table] | None:
    """The partitions of `table` that hold more than one data file (sorted), and their rows
    without the layout columns, both from one snapshot and found from the log, so no folder is
    listed. None while the table does not exist, is not partitioned, or has a partition column
    that is not text or holds a null: the caller lists through Spark then."""
    import pyarrow as pa

    delta = _opened(settings, table)
    if delta is None:
        return None
    columns = tuple(delta.metadata().partition_columns)
    if not columns:
        return None
    adds = pa.table(delta.get_add_actions(flatten=True))
    values = [adds[f"partition.{c}"] for c in columns]
    if any(not pa.types.is_string(v.type) or v.null_count for v in values):
        return None
    files = Counter(
        tuple(zip(columns, row, strict=True))
        for row in zip(*(v.to_pylist() for v in values), strict=True)
    )
    crowded = sorted(p for p, count in files.items() if count > 1)
    if not crowded:
        return crowded, pa.table({})
    # Disjunctive normal form: a partition's pairs AND-ed, the partitions OR-ed.
    rows = delta.to_pyarrow_table(filters=[[(c, "=", v) for c, v in p] for p in crowded])
    return crowded, rows.drop_columns([n for n in table.layout_names if n in rows.column_names])


def _as_stored(delta: DeltaTable, rows: Callable[[tuple[str, ...]], pa.Table]) -> pa.Table | None:
    """`rows(the table's partition columns)` in the table's column order and types; None when
    their columns are not the table's (an older table a Spark write would widen)."""
    import pyarrow as pa

    stored = pa.schema(delta.schema().to_arrow())
    given = rows(tuple(delta.metadata().partition_columns))
    if sorted(given.column_names) != sorted(stored.names):
        return None
    return given.select(stored.names).cast(stored)
