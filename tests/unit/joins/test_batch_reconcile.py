"""The judge of the batch layer's revenue view against the stream's, on a local lakehouse: equal
when both saw the same events and history versions, a wrong stream row named; the windows of a
run that joined other history versions, or that read further than the speed layer, left open
with the reason, until a rerun of the interval joins the same."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pytest

from lakehouse.batch.recompute import Interval
from lakehouse.cdc.shop import PRODUCTS, USERS
from lakehouse.core.config import Settings
from lakehouse.core.delta_io import append_once, read_table
from lakehouse.core.frames import rows_frame
from lakehouse.core.tables import table
from lakehouse.joins.batch import recompute_revenue
from lakehouse.joins.batch_reconcile import reconcile_batch_revenue
from lakehouse.joins.enrichment import ENRICHED, EVENT_COLUMNS, EnrichmentProcessor
from lakehouse.reconcile.joins import enrichment_batch_judge
from lakehouse.transforms.bronze import to_raw_records
from tests.lakehouses import copied, local_lakehouse
from tests.micro_batches import kafka_records, query_checkpoint
from tests.unit.joins.histories import at, version, write_history

pytestmark = pytest.mark.slow  # make test-fast leaves it out (docs/testing.md)

SILVER = table("silver.events")
PROGRESS = table("ops.speed_progress")
HOUR = Interval(at(0), at(60))
# (event_id, user, minute, type): purchases of p1 for 10.00 in the 10:00 hour, and page views
# at 12:30 that support a watermark past it.
EVENTS = [
    ("e1", "u1", 5, "purchase"),
    ("e2", "u2", 20, "purchase"),
    ("e3", "u2", 40, "purchase"),
    ("v1", "u1", 30, "page_view"),
    *[(f"w{i}", "u3", 150, "page_view") for i in range(6)],
]


def fields(event_id: str, user: str, minute: float, kind: str) -> dict:
    purchase = {"product_id": "p1", "amount": 10} if kind == "purchase" else {}
    return {
        "event_id": event_id,
        "event_type": kind,
        "user_id": user,
        "page": "/p",
        "event_time": f"{at(minute):%Y-%m-%dT%H:%M:%S}Z",
        **purchase,
    }


def silver_row(offset: int, event_id: str, user: str, minute: float, kind: str) -> dict:
    return {
        "event_id": event_id,
        "event_type": kind,
        "user_id": user,
        "session_id": None,
        "page": "/p",
        "product_id": "p1" if kind == "purchase" else None,
        "amount": Decimal("10.00") if kind == "purchase" else None,
        "event_time": at(minute),
        "sent_at": None,
        "event_date": at(minute).date(),
        "kafka_partition": 0,
        "kafka_offset": offset,
        "kafka_timestamp": datetime.now(UTC),
        "ingested_at": datetime.now(UTC),
        "arrived_late": False,
    }


def speed_read_up_to(spark, settings, next_offset: int, batch_id: int) -> None:
    """A progress row of the speed layer: silver version 0 written, partition 0 read up to
    `next_offset`."""
    row = {f.name: None for f in PROGRESS.spark_schema().fields} | {
        "app_id": "speed",
        "batch_id": batch_id,
        "processed_at": datetime.now(UTC),
        "silver_version": 0,
        "offsets": {0: next_offset},
    }
    frame = rows_frame(spark, [row], PROGRESS.spark_schema())
    append_once(frame, PROGRESS, settings, "speed-progress", batch_id)


@pytest.fixture(scope="module")
def built(spark, tmp_path_factory) -> Path:
    """Bronze, silver and the speed layer's progress for EVENTS; the histories; one
    enrichment batch over silver; the batch layer's run of the 10:00 hour. Built once; each
    test writes to a copy (`lake`)."""
    folder = tmp_path_factory.mktemp("batch_reconcile")
    settings = local_lakehouse(folder)
    write_history(spark, settings, USERS, [version(USERS, ("u1", "new", "DE"), -60, None, 10)])
    write_history(
        spark,
        settings,
        PRODUCTS,
        [version(PRODUCTS, ("p1", "Mug", "kitchen", Decimal("4.00")), -60, None, 20)],
    )
    raw = kafka_records(spark, [(e[1], fields(*e)) for e in EVENTS], 0)
    append_once(raw.transform(to_raw_records), table("bronze.events_raw"), settings, "speed", 0)
    silver = rows_frame(
        spark, [silver_row(i, *e) for i, e in enumerate(EVENTS)], SILVER.spark_schema()
    )
    append_once(silver, SILVER, settings, "speed", 0)
    speed_read_up_to(spark, settings, len(EVENTS), 0)
    stream = EnrichmentProcessor(settings, str(query_checkpoint(folder / "q", "enrich-1")))
    stream(read_table(spark, SILVER, settings).select(*EVENT_COLUMNS, "event_date"), 0)
    recompute_revenue(spark, settings, HOUR, "run-1")
    return folder


@pytest.fixture
def lake(built: Path, tmp_path: Path) -> tuple[Settings, EnrichmentProcessor]:
    """A copy of the built lakehouse, and the enrichment stream restarted on it."""
    folder = copied(built, tmp_path / "copy")
    settings = local_lakehouse(folder)
    return settings, EnrichmentProcessor(settings, str(folder / "q"))


def test_the_batch_equals_the_stream_and_a_wrong_stream_row_is_named(spark, lake) -> None:
    settings, stream = lake
    judged = reconcile_batch_revenue(spark, settings)
    # (new, kitchen) for u1's purchase; (unknown), not in the users' history, for u2's two.
    assert (judged.compared, judged.differing, judged.open) == (2, 0, 0), judged

    # A stream fault: batch 1's row of e3 names a segment u2 never had.
    stream(read_table(spark, SILVER, settings).limit(0).select(*EVENT_COLUMNS, "event_date"), 1)
    [e3] = read_table(spark, ENRICHED, settings).where("event_id = 'e3'").collect()
    wrong = {**e3.asDict(), "segment": "vip", "user_match": "matched", "enriched_batch": 1}
    append_once(rows_frame(spark, [wrong], ENRICHED.spark_schema()), ENRICHED, settings, "x", 0)

    [output] = enrichment_batch_judge(spark, settings)
    assert (output.view, output.compared, output.differing) == ("batch.revenue_by_segment", 3, 2)
    assert any("segment=vip" in e for e in output.examples), output.examples


def test_a_run_on_other_history_versions_is_open_until_the_interval_is_rerun(spark, lake) -> None:
    settings, stream = lake
    # u2 is captured after the run: the stream's next batch joins it, the run did not.
    write_history(
        spark,
        settings,
        USERS,
        [
            version(USERS, ("u1", "new", "DE"), -60, None, 10),
            version(USERS, ("u2", "gold", "FR"), -60, None, 30),
        ],
    )
    stream(read_table(spark, SILVER, settings).limit(0).select(*EVENT_COLUMNS, "event_date"), 1)

    judged = reconcile_batch_revenue(spark, settings)
    assert (judged.compared, judged.open) == (0, 2), judged
    assert "joined other history versions (users 0, products 0)" in judged.reasons[0]
    assert "(users 1, products 0)" in judged.reasons[0]

    recompute_revenue(spark, settings, HOUR, "run-2")
    judged = reconcile_batch_revenue(spark, settings)
    assert (judged.compared, judged.differing, judged.open) == (2, 0, 0), judged


def test_a_run_that_read_further_than_the_speed_layer_is_open(spark, lake) -> None:
    settings, _ = lake
    speed_read_up_to(spark, settings, 2, 1)  # a newer row at the same silver version

    judged = reconcile_batch_revenue(spark, settings)
    assert (judged.compared, judged.open) == (0, 2), judged
    behind = "the speed layer had not read partitions [0] as far as the run"
    assert judged.reasons[0].endswith(behind), judged.reasons
