"""A stream's output tables belong to the checkpoint of the query that writes them.

A query keys what it writes on its id and batch ids (delta_io.append_batch), and both start
over with a new checkpoint, which also reads the query's Delta sources from their first
version: a query on another checkpoint (the old one deleted or moved) would write every row a
second time. So a stream checks, before its query starts, that the batches its progress table
records are its checkpoint's (`check_own_outputs`), and is reset, tables and checkpoint
together, to start afresh (`reset_outputs`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from lakehouse.core.checkpoints import checkpoint_query_id, checkpoint_started
from lakehouse.core.config import Settings
from lakehouse.core.locks import exclusive_writer
from lakehouse.core.small_tables import column_values
from lakehouse.core.storage import StorageError
from lakehouse.core.tables import Table

if TYPE_CHECKING:
    import pyarrow.compute as pc
    from pyspark.sql import SparkSession


class OtherCheckpointError(StorageError):
    """The outputs hold what a query on another checkpoint wrote; the message says what to do."""


def check_own_outputs(
    spark: SparkSession,
    settings: Settings,
    output: Table,
    progress: Table,
    checkpoint: str,
    app_prefix: str,
    fix: str,
    where: pc.Expression | None = None,
) -> None:
    """OtherCheckpointError unless every batch `progress` records (the rows `where` keeps) was
    written by the query of `checkpoint`, whose app id is `app_prefix` and its query id, or
    none was. `fix` says what to do instead."""
    written = column_values(settings, progress, "app_id", where)
    if checkpoint_started(spark, checkpoint):
        written.discard(f"{app_prefix}{checkpoint_query_id(spark, checkpoint)}")
    if written:
        raise OtherCheckpointError(
            f"{output.name} holds what another checkpoint's query wrote "
            f"({', '.join(sorted(written))}), and {checkpoint} is not its checkpoint: a query "
            f"there would read its input from the start again and write its rows a second "
            f"time; {fix}"
        )


def replay_again(version: str) -> str:
    """What to do when a replay version's tables belong to another checkpoint."""
    return f"remove the version (`python -m jobs.versions remove {version}`) and replay it"


def reset_outputs(
    settings: Settings, writer: str, tables: Iterable[Table], checkpoints: Iterable[str]
) -> list[str]:
    """Remove a stream's tables and checkpoints, holding its writer's lock (WriterBusyError
    while the stream runs). What was removed, by name."""
    from lakehouse.core.delta_io import delete_folder, table_exists
    from lakehouse.core.spark import get_spark_checked

    with exclusive_writer(settings, writer):
        spark = get_spark_checked(f"{writer}-reset", settings)
        removed = []
        for target in tables:
            if table_exists(spark, target, settings):
                delete_folder(spark, target.path(settings))
                removed.append(target.name)
        for checkpoint in checkpoints:
            if checkpoint_started(spark, checkpoint):
                removed.append(f"the checkpoint {checkpoint}")
            delete_folder(spark, checkpoint)
        return removed
