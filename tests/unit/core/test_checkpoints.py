"""A local checkpoint's blocks are freed when we say so, not when the JVM gets round to it."""

from __future__ import annotations

import pytest

from lakehouse.core.spark import release_local_checkpoint


def stored_rdds(spark) -> set[int]:
    return {info.id() for info in spark.sparkContext._jsc.sc().getRDDStorageInfo()}


def test_release_frees_the_checkpointed_blocks(spark) -> None:
    before = stored_rdds(spark)
    checkpointed = (
        spark.range(1000).selectExpr("id", "cast(id as string) AS text").localCheckpoint()
    )
    held = stored_rdds(spark) - before
    assert held, "localCheckpoint stored no block"
    release_local_checkpoint(checkpointed)
    assert not (stored_rdds(spark) & held)


def test_only_a_checkpointed_frame_can_be_released(spark) -> None:
    with pytest.raises(ValueError, match="localCheckpoint"):
        release_local_checkpoint(spark.range(3))
