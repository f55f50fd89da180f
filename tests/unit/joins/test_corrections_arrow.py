"""lakehouse.joins.corrections_arrow: a correcting batch's earlier rows found on the driver are
the rows Spark's read finds (each changed key's events' latest rows from the change's start),
and only while the files that may hold them are few and the rows read are within the bytes
bound."""

from __future__ import annotations

from decimal import Decimal

import pytest

from lakehouse.cdc.shop import PRODUCTS, USERS
from lakehouse.core.delta_io import read_table
from lakehouse.core.frames import rows_frame
from lakehouse.core.times import to_micros
from lakehouse.joins.corrections import Changed, latest_rows
from lakehouse.joins.corrections_arrow import earlier_latest
from lakehouse.joins.enrichment import ENRICHED, EnrichmentProcessor
from tests.lakehouses import local_lakehouse
from tests.micro_batches import query_checkpoint
from tests.unit.joins.histories import at, version, write_history

pytestmark = pytest.mark.slow  # make test-fast leaves it out (docs/testing.md)

SILVER = (
    "event_id string, event_type string, user_id string, product_id string, "
    "amount decimal(18,2), event_time timestamp, event_date date"
)


def purchases(spark, rows: list[tuple[str, str, float]]):
    """(event_id, user_id, minute) purchases of p1 as silver rows."""
    return rows_frame(
        spark,
        [(e, "purchase", u, "p1", Decimal("1.00"), at(m), at(m).date()) for e, u, m in rows],
        SILVER,
    )


def test_the_earlier_rows_found_on_the_driver_are_the_latest_rows_spark_reads(
    spark, tmp_path
) -> None:
    """Three batches, u1's events corrected in the second: the driver keeps each changed
    key's events from the change's start on, each event's latest row as Spark ranks them;
    rows of a batch not before the asking one are left out; with a bound below the rows the
    files hold, or a key new to the history (every row may change), it says so (None)."""
    settings = local_lakehouse(tmp_path)
    write_history(
        spark, settings, PRODUCTS, [version(PRODUCTS, ("p1", "Mug", "home", 4), 0, None, 5)]
    )
    write_history(spark, settings, USERS, [version(USERS, ("u1", "new", "DE"), 0, None, 10)])
    stream = EnrichmentProcessor(settings, str(query_checkpoint(tmp_path / "q", "corrections")))
    stream(purchases(spark, [("e1", "u1", 10), ("e2", "u2", 20), ("e3", "u1", 30)]), 0)
    write_history(
        spark,
        settings,
        USERS,
        [
            version(USERS, ("u1", "new", "DE"), 0, 25, 10),
            version(USERS, ("u1", "gold", "DE"), 25, None, 30),
        ],
    )
    stream(purchases(spark, [("e4", "u1", 40)]), 1)  # corrects e3
    stream(purchases(spark, [("e5", "u1", 50)]), 2)

    u1 = rows_frame(spark, [("u1", at(20), False)], "_key string, _from timestamp, _new boolean")
    changes = {"users": Changed(u1, to_micros(at(20)), False, u1.toArrow())}
    found = earlier_latest(settings, ENRICHED, 2, changes)
    assert found is not None
    spark_read = latest_rows(
        read_table(spark, ENRICHED, settings).where(
            f"enriched_batch < 2 AND user_id = 'u1' AND event_time >= '{at(20)}'"
        )
    )
    on_driver = spark.createDataFrame(found, ENRICHED.spark_schema())
    assert sorted(on_driver.collect()) == sorted(spark_read.collect())
    assert {(r["event_id"], r["enriched_batch"]) for r in on_driver.collect()} == {
        ("e3", 1),  # its correction, not its first row
        ("e4", 1),
    }

    few = settings.model_copy(
        update={"speed": settings.speed.model_copy(update={"correction_read_rows": 1})}
    )
    assert earlier_latest(few, ENRICHED, 2, changes) is None
    small = settings.model_copy(
        update={"speed": settings.speed.model_copy(update={"delta_rs_append_mb": 0})}
    )
    assert earlier_latest(small, ENRICHED, 2, changes) is None  # more bytes than the bound
    new_key = {"users": changes["users"]._replace(new_keys=True)}
    every = earlier_latest(settings, ENRICHED, 2, new_key)
    assert every is not None and {r["event_id"] for r in every.to_pylist()} == {"e1", "e3", "e4"}
