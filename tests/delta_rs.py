"""Reading a lakehouse with another Delta engine than Spark: delta-rs, as a user's pandas would."""

from __future__ import annotations

from typing import TYPE_CHECKING

from deltalake import DeltaTable

from lakehouse.core.config import Settings
from lakehouse.core.delta_io import delta_rs_location, table_exists
from lakehouse.core.tables import TABLES

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import SparkSession


def read_every_table(spark: SparkSession, settings: Settings) -> dict[str, pd.DataFrame]:
    """Every table of the registry that exists in the lakehouse, read by delta-rs into Arrow,
    validated in full (a string column holding bytes that are not UTF-8 fails here), then
    into pandas."""
    read = {}
    for name, t in TABLES.items():
        if table_exists(spark, t, settings):
            uri, options = delta_rs_location(settings, t.path(settings))
            arrow = DeltaTable(uri, storage_options=options).to_pyarrow_table()
            arrow.validate(full=True)
            read[name] = arrow.to_pandas()
    return read
