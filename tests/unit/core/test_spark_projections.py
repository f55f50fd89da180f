"""Small micro-batches interpret Spark's row projections; the setting never outlives them."""

from __future__ import annotations

import pytest

from lakehouse.core.spark import PROJECTIONS, interpreted_projections


def test_the_setting_holds_inside_the_block_and_is_restored_after(spark) -> None:
    spark.conf.unset(PROJECTIONS)
    with interpreted_projections(spark, True):
        assert spark.conf.get(PROJECTIONS) == "NO_CODEGEN"
        assert spark.range(5).selectExpr("sum(id * 2)").first()[0] == 20
    assert spark.conf.get(PROJECTIONS, None) is None

    spark.conf.set(PROJECTIONS, "FALLBACK")
    try:
        with pytest.raises(RuntimeError), interpreted_projections(spark, True):
            raise RuntimeError("a failed batch")
        assert spark.conf.get(PROJECTIONS) == "FALLBACK"
    finally:
        spark.conf.unset(PROJECTIONS)


def test_a_large_batch_keeps_generated_code(spark) -> None:
    spark.conf.unset(PROJECTIONS)
    with interpreted_projections(spark, False):
        assert spark.conf.get(PROJECTIONS, None) is None
