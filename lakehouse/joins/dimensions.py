"""The dimensions the enrichment joins, and their history tables as it reads them: at a
pinned version, through Spark or (a history is small) by delta-rs on the driver."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from lakehouse.cdc.changelog import history_table
from lakehouse.cdc.shop import PRODUCTS, USERS, CapturedTable
from lakehouse.core.delta_io import read_table_at
from lakehouse.core.frames import rows_frame
from lakehouse.core.small_tables import table_arrow
from lakehouse.core.spark import release_local_checkpoint
from lakehouse.transforms.as_of import Dimension
from lakehouse.transforms.enrichment import PRODUCT, USER

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

    from lakehouse.core.config import Settings

# Each dimension and the captured table whose history it joins.
DIMENSIONS: dict[str, tuple[Dimension, CapturedTable]] = {
    "users": (USER, USERS),
    "products": (PRODUCT, PRODUCTS),
}


class Known(NamedTuple):
    """A dimension's history at a pinned version and its timeline (transforms.as_of), with
    their rows on the driver when delta-rs read the history (`rows` and `segments`; None:
    read through Spark, both frames locally checkpointed)."""

    history: DataFrame
    timeline: DataFrame
    rows: pa.Table | None
    segments: pa.Table | None

    def release(self) -> None:
        """Free the local checkpoints it holds."""
        if self.rows is None:
            release_local_checkpoint(self.history)
            release_local_checkpoint(self.timeline)


def history_at(
    spark: SparkSession, settings: Settings, name: str, version: int | None
) -> DataFrame:
    """A dimension's history (DIMENSIONS) at `version`; no rows when it did not exist."""
    target = history_table(DIMENSIONS[name][1])
    found = read_table_at(spark, target, settings, version)
    return found if found is not None else rows_frame(spark, [], target.spark_schema())


def history_frame(spark: SparkSession, name: str, rows: pa.Table) -> DataFrame:
    """A dimension's history rows, read on the driver (history_rows), as a Spark frame."""
    return spark.createDataFrame(rows, history_table(DIMENSIONS[name][1]).spark_schema())


def history_rows(settings: Settings, name: str, version: int | None) -> pa.Table | None:
    """history_at's rows, read by delta-rs on the driver, or None when it cannot read them (or
    there was no history then): a history is small (the as-of join broadcasts its timeline),
    and Spark's read of a Delta version first rebuilds the table's state, which takes longer
    than reading its rows."""
    target = history_table(DIMENSIONS[name][1])
    return None if version is None else table_arrow(settings, target, version)
