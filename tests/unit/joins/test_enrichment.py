"""The enrichment stream's micro-batches on a local lakehouse: events take the dimension rows
valid at their time; a dimension change that arrives after its events corrects them in the
next batch, recorded and added to the view's partial rows; a retried batch joins with the
history its first try pinned and writes nothing twice."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal

import pytest
from pyspark.sql import functions as F

from lakehouse.cdc.changelog import history_table
from lakehouse.cdc.shop import PRODUCTS, USERS
from lakehouse.core.delta_io import read_table, table_version
from lakehouse.core.frames import rows_frame
from lakehouse.joins import enrichment
from lakehouse.joins.corrections import earlier_rows, latest_rows, measured_starts
from lakehouse.joins.enrichment import (
    ENRICHED,
    PINS,
    PROGRESS,
    REVENUE,
    EnrichmentProcessor,
)
from lakehouse.transforms.enrichment import (
    USER,
    combine_revenue,
    enrich_events,
    revenue_by_segment,
)
from tests.lakehouses import local_lakehouse
from tests.micro_batches import query_checkpoint
from tests.unit.joins.histories import at, version, write_history

pytestmark = pytest.mark.slow  # make test-fast leaves it out (docs/testing.md)

SILVER = (
    "event_id string, event_type string, user_id string, product_id string, "
    "amount decimal(18,2), event_time timestamp, event_date date"
)


def silver(spark, rows: list[tuple[str, str, str, float]]):
    """(event_id, user_id, product_id, minute) purchases of 10.00 as silver rows."""
    return rows_frame(
        spark,
        [(e, "purchase", u, p, Decimal("10.00"), at(m), at(m).date()) for e, u, p, m in rows],
        SILVER,
    )


def latest(spark, settings) -> dict[str, tuple]:
    rows = latest_rows(read_table(spark, ENRICHED, settings)).collect()
    return {r["event_id"]: (r["segment"], r["category"], r["corrected"]) for r in rows}


def versions(spark, settings) -> dict[str, int | None]:
    return {t.name: table_version(spark, t, settings) for t in (ENRICHED, REVENUE, PINS, PROGRESS)}


USER_NEW = version(USERS, ("u1", "new", "DE"), 0, None, 10)
P1 = version(PRODUCTS, ("p1", "Mug", "kitchen", Decimal("4.00")), 0, None, 20)


@pytest.fixture
def lake(spark, tmp_path):
    settings = local_lakehouse(tmp_path)
    write_history(spark, settings, USERS, [USER_NEW])
    write_history(spark, settings, PRODUCTS, [P1])
    checkpoint = str(query_checkpoint(tmp_path / "query", "enrichment-1"))
    return settings, checkpoint


@pytest.mark.parametrize("found", ["on the driver", "rows through Spark", "changes through Spark"])
def test_a_late_dimension_change_corrects_its_events_in_the_next_batch(
    spark, lake, found, monkeypatch
) -> None:
    """The same correction whichever way it is found: on the driver (delta-rs and Arrow), or
    through Spark when the earlier rows are more than `speed.correction_read_rows` or delta-rs
    cannot read the histories."""
    settings, checkpoint = lake
    if found == "rows through Spark":
        speed = settings.speed.model_copy(update={"correction_read_rows": 0})
        settings = settings.model_copy(update={"speed": speed})
    if found == "changes through Spark":
        monkeypatch.setattr(enrichment, "history_rows", lambda *_: None)
    stream = EnrichmentProcessor(settings, checkpoint)
    stream(silver(spark, [("e1", "u1", "p1", 10), ("e2", "u1", "p2", 20)]), 0)
    assert latest(spark, settings) == {
        "e1": ("new", "kitchen", False),
        "e2": ("new", None, False),  # p2 not captured yet: unknown
    }
    # The changelog catches up: p2 existed from minute 5, u1 turned gold at minute 15.
    write_history(
        spark,
        settings,
        USERS,
        [
            version(USERS, ("u1", "new", "DE"), 0, 15, 10),
            version(USERS, ("u1", "gold", "DE"), 15, None, 30),
        ],
    )
    write_history(
        spark,
        settings,
        PRODUCTS,
        [P1, version(PRODUCTS, ("p2", "Rake", "garden", Decimal("9.00")), 5, None, 25)],
    )
    stream(silver(spark, [("e3", "u1", "p1", 30)]), 1)

    assert latest(spark, settings) == {
        "e1": ("new", "kitchen", False),  # before the change: left as it was
        "e2": ("gold", "garden", True),
        "e3": ("gold", "kitchen", False),
    }
    enriched = read_table(spark, ENRICHED, settings)
    assert enriched.count() == 4, "e2's first row is kept; its correction is a row of its own"
    progress = read_table(spark, PROGRESS, settings).orderBy("batch_id").collect()
    assert [(r["events"], r["corrected"]) for r in progress] == [(2, 0), (1, 1)]

    events = silver(spark, [("e1", "u1", "p1", 10), ("e2", "u1", "p2", 20), ("e3", "u1", "p1", 30)])
    users = read_table(spark, history_table(USERS), settings)
    products = read_table(spark, history_table(PRODUCTS), settings)
    judge = revenue_by_segment(enrich_events(events.drop("event_date"), users, products))
    stream_view = combine_revenue(read_table(spark, REVENUE, settings).drop("batch_id"))
    assert sorted(stream_view.collect()) == sorted(combine_revenue(judge).collect())


def test_a_correction_reads_only_the_earlier_rows_from_the_first_event_it_may_change(
    spark, lake
) -> None:
    """u1 turns gold at minute 50, after batch 0's event at 10 and batch 1's at 60 were
    enriched: finding what to correct reads batch 1's file, not batch 0's. u9, never captured,
    then gets a first version: its events were `unknown` at any time, so its event at 5 brings
    batch 0's file back in."""
    settings, checkpoint = lake
    stream = EnrichmentProcessor(settings, checkpoint)
    stream(silver(spark, [("e1", "u1", "p1", 10), ("e0", "u9", "p1", 5)]), 0)
    stream(silver(spark, [("e2", "u1", "p1", 60)]), 1)
    files: dict[int, set[str]] = {}
    for r in (
        spark.read.format("delta")
        .load(ENRICHED.path(settings))
        .select(F.col("enriched_batch").alias("batch"), F.input_file_name().alias("file"))
        .collect()
    ):
        files.setdefault(r["batch"], set()).add(r["file"])
    was = read_table(spark, history_table(USERS), settings).localCheckpoint()
    u1 = [
        version(USERS, ("u1", "new", "DE"), 0, 50, 10),
        version(USERS, ("u1", "gold", "DE"), 50, None, 30),
    ]

    def read_for(versions: list[tuple]) -> set[str]:
        write_history(spark, settings, USERS, versions)
        now = read_table(spark, history_table(USERS), settings)
        changes = {"users": measured_starts(now, was, USER)}
        earlier = earlier_rows(spark, settings, ENRICHED, 2, changes)
        assert earlier is not None
        return set(earlier.inputFiles())

    assert read_for(u1) == files[1]
    assert read_for([*u1, version(USERS, ("u9", "new", "DE"), 55, None, 40)]) == files[0] | files[1]

    stream(silver(spark, [("e3", "u1", "p1", 70)]), 2)
    assert latest(spark, settings) == {
        "e0": (None, "kitchen", True),  # u9 not_yet at minute 5
        "e1": ("new", "kitchen", False),
        "e2": ("gold", "kitchen", True),
        "e3": ("gold", "kitchen", False),
    }


def test_a_retried_batch_joins_the_history_its_first_try_pinned(spark, lake) -> None:
    settings, checkpoint = lake
    first = silver(spark, [("e1", "u1", "p1", 10)])
    EnrichmentProcessor(settings, checkpoint)(first, 0)
    second = silver(spark, [("e2", "u1", "p1", 40)])
    # The first try of batch 1 pins the history and dies before it writes anything else.
    crashed = EnrichmentProcessor(settings, checkpoint)
    with ThreadPoolExecutor(1) as pool:
        crashed.pin(spark, crashed.app_id(spark), 1, False, pool)[1].result()
    # Then the user's segment changes, and batch 1 is tried again by a restarted stream.
    write_history(
        spark,
        settings,
        USERS,
        [
            version(USERS, ("u1", "new", "DE"), 0, 5, 10),
            version(USERS, ("u1", "vip", "DE"), 5, None, 30),
        ],
    )
    restarted = EnrichmentProcessor(settings, checkpoint)
    restarted(second, 1)
    assert latest(spark, settings) == {
        "e1": ("new", "kitchen", False),
        "e2": ("new", "kitchen", False),  # as of the pinned history
    }
    before = versions(spark, settings)
    EnrichmentProcessor(settings, checkpoint)(second, 1)  # Spark hands it over once more
    assert versions(spark, settings) == before, "nothing written twice"
    restarted(silver(spark, [("e3", "u1", "p1", 50)]), 2)
    assert latest(spark, settings) == {
        "e1": ("vip", "kitchen", True),
        "e2": ("vip", "kitchen", True),
        "e3": ("vip", "kitchen", False),
    }


def test_the_judge_finds_the_stream_equal_and_names_an_event_it_got_wrong(spark, lake) -> None:
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    from lakehouse.joins.reconcile import NothingToReconcile, reconcile_enrichment

    settings, checkpoint = lake
    with pytest.raises(NothingToReconcile, match="has completed no batch yet"):
        reconcile_enrichment(spark, settings)
    stream = EnrichmentProcessor(settings, checkpoint)
    stream(silver(spark, [("e1", "u1", "p1", 10), ("e2", "u1", "p2", 20)]), 0)
    write_history(
        spark,
        settings,
        PRODUCTS,
        [P1, version(PRODUCTS, ("p2", "Rake", "garden", Decimal("9.00")), 5, None, 25)],
    )
    stream(silver(spark, [("e3", "u1", "p2", 30)]), 1)
    judged = reconcile_enrichment(spark, settings)
    assert judged.equal and judged.batch_id == 1
    assert (judged.events.compared, judged.windows.compared) == (3, 2)

    # A row the stream got wrong: e1's category, as if joined with the wrong version.
    rows = DeltaTable.forPath(spark, ENRICHED.path(settings))
    rows.update("event_id = 'e1'", {"category": F.lit("garden")})
    wrong = reconcile_enrichment(spark, settings)
    assert (wrong.events.differing, wrong.windows.differing) == (1, 0)
    [example] = wrong.events.examples
    assert example.startswith("event_id=e1: ") and "'category': 'kitchen'" in example
    assert "'category': 'garden'" in example.split("in the recompute")[1]
