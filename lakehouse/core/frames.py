"""DataFrames of rows built in Python: progress rows, run records, and the tests' tiny tables.

`spark.createDataFrame(list_of_rows)` makes an RDD of pickled rows, and every action on the
DataFrame sends them through Python worker processes again: a few hundred milliseconds for a
few rows. `rows_frame` hands Spark the rows as one Arrow table instead, which the JVM reads
itself. The values mean what they mean to createDataFrame: a naive datetime is local time.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import DataType, StructType


def rows_frame(spark: SparkSession, rows: Iterable[Any], schema: str | DataType) -> DataFrame:
    """A DataFrame of `rows` (tuples or Rows in the schema's column order, or dicts by name).
    `schema` is a StructType or DDL ("id long, at timestamp"); any other type (e.g. "string")
    makes one column named value, as in createDataFrame."""
    struct, table = _arrow_rows(rows, schema)
    return spark.createDataFrame(table, struct)


def checkpoint_measured(df: DataFrame) -> tuple[DataFrame, int, int]:
    """`df` locally checkpointed, with its row count and its rows' size as JSON text (about
    what collecting them to the driver holds), observed while the checkpoint computes the
    rows: no Spark job of their own."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    measured = Observation()
    as_json = F.to_json(F.struct(*(F.col(f"`{c}`") for c in df.columns)))
    frame = df.observe(
        measured,
        F.count(F.lit(1)).alias("rows"),
        F.sum(F.octet_length(as_json)).alias("size"),
    ).localCheckpoint()
    found = measured.get
    return frame, int(found["rows"]), int(found["size"] or 0)


def collect_few(df: DataFrame, max_rows: int, max_bytes: int) -> pa.Table | None:
    """`df`'s rows on the driver as Arrow when they are at most `max_rows` and `max_bytes`
    (as Arrow holds them), else None: one Spark job, which stops at `max_rows` + 1 rows."""
    found = df.limit(max_rows + 1).toArrow()
    return found if found.num_rows <= max_rows and found.nbytes <= max_bytes else None


def rows_arrow(rows: Iterable[Any], schema: str | StructType) -> pa.Table:
    """`rows` as rows_frame reads them, as an Arrow table in the schema's Arrow types."""
    return _arrow_rows(rows, schema)[1]


def _arrow_rows(rows: Iterable[Any], schema: str | DataType) -> tuple[StructType, pa.Table]:
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import DataType, StructField, StructType

    struct = DataType.fromDDL(schema) if isinstance(schema, str) else schema
    if not isinstance(struct, StructType):
        struct = StructType([StructField("value", struct)])
        rows = [(value,) for value in rows]
    names = struct.fieldNames()
    records = [_record(row, names) for row in rows]
    columns = {
        field.name: [_arrow_value(r[i], field.dataType) for r in records]
        for i, field in enumerate(struct.fields)
    }
    return struct, pa.Table.from_pydict(columns, schema=to_arrow_schema(struct))


def _record(row: Any, names: list[str]) -> Sequence[Any]:
    if isinstance(row, Mapping):
        return [row.get(name) for name in names]
    if len(row) != len(names):
        raise ValueError(f"a row of {len(row)} values for {len(names)} columns {names}: {row!r}")
    return row


def _arrow_value(value: Any, dtype: DataType) -> Any:
    """`value` as pyarrow takes it for `dtype`: structs as dicts, maps as pairs, datetimes
    in UTC (a naive one is the local time it stands for). pyarrow is handed UTC wall clocks
    only, so the instant holds whether or not it applies an aware value's own offset."""
    from pyspark.sql.types import ArrayType, MapType, StructType, TimestampType

    if value is None:
        return None
    if isinstance(dtype, TimestampType) and isinstance(value, datetime):
        return value.astimezone(UTC)
    if isinstance(dtype, StructType):
        fields = dtype.fields
        values = _record(value, dtype.fieldNames())
        return {f.name: _arrow_value(v, f.dataType) for f, v in zip(fields, values, strict=True)}
    if isinstance(dtype, ArrayType):
        return [_arrow_value(v, dtype.elementType) for v in value]
    if isinstance(dtype, MapType):
        return [
            (_arrow_value(k, dtype.keyType), _arrow_value(v, dtype.valueType))
            for k, v in value.items()
        ]
    return value
