"""The windowed stream-stream joins over tiny Delta inputs appended in steps, each step one
`--available-now` run from the same checkpoint (lakehouse.joins.windowed.run_joins), with a
crash simulated after the second step: the stream equals the batch join over the rows it read
on time (the judge), a late row is dropped exactly as the recorded watermark says, an unpaid
order is emitted once after the watermark passes its hour, the join state grows and shrinks,
and a batch run again after a crash adds nothing twice. The scenario runs once per module.

Watermark delay 10 minutes, attribution window 30 minutes, payment window 60 minutes."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest

from jobs.contract import Exit, read_result
from lakehouse.core.config import Settings
from lakehouse.core.delta_io import append_new, read_table, table_exists
from lakehouse.core.frames import rows_frame
from lakehouse.core.small_tables import table_version
from lakehouse.core.tables import JOINS, Table
from lakehouse.joins.windowed import (
    ATTRIBUTION,
    ATTRIBUTION_QUERY,
    EVENTS,
    ORDER_EVENTS,
    ORDER_PAYMENTS,
    ORDER_PAYMENTS_QUERY,
    PAYMENTS,
    PROGRESS,
    QUERIES,
    JoinQuery,
    queries_of,
    run_joins,
)
from lakehouse.joins.windowed_reconcile import (
    JoinVerdict,
    reconcile_join,
    reconcile_windowed_joins,
)
from lakehouse.replay.promotion import remove
from lakehouse.replay.versions import record_version_event
from tests.conftest import _settings
from tests.jobs_in_process import RunJob

pytestmark = pytest.mark.slow  # make test-fast leaves it out (docs/testing.md)

T0 = datetime(2026, 11, 25, 10, 0, tzinfo=UTC)


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def append_events(
    spark,
    settings: Settings,
    events: list[tuple[str, str, str, str, float]],
    target: Table = EVENTS,
) -> None:
    """(event_id, event_type, user_id, product_id, minute), as the speed layer appends them."""
    rows = [
        {
            "event_id": e,
            "event_type": kind,
            "user_id": user,
            "session_id": "s",
            "page": "/p",
            "product_id": product,
            "amount": Decimal("5.00") if kind == "purchase" else None,
            "event_time": at(m),
            "sent_at": at(m),
            "event_date": at(m).date(),
            "kafka_partition": 0,
            "kafka_offset": 0,
            "kafka_timestamp": at(m),
            "ingested_at": at(m),
            "arrived_late": False,
        }
        for e, kind, user, product, m in events
    ]
    append_new(rows_frame(spark, rows, EVENTS.spark_schema()).coalesce(1), target, settings)


def append_orders(
    spark, settings: Settings, orders: list[tuple[str, float]], target: Table = ORDER_EVENTS
) -> None:
    """(order_id, minute placed): order events of type placed."""
    rows = [
        {
            "event_id": f"placed-{o}",
            "order_id": o,
            "user_id": "u1",
            "type": "placed",
            "amount": Decimal("20.00"),
            "event_time": at(m),
        }
        for o, m in orders
    ]
    frame = rows_frame(spark, rows, ORDER_EVENTS.spark_schema()).coalesce(1)
    append_new(frame, target, settings)


def append_payments(
    spark, settings: Settings, payments: list[tuple[str, str, float]], target: Table = PAYMENTS
) -> None:
    """(payment_id, order_id, minute paid)."""
    rows = [
        {"payment_id": p, "order_id": o, "amount": Decimal("20.00"), "paid_at": at(m)}
        for p, o, m in payments
    ]
    append_new(rows_frame(spark, rows, PAYMENTS.spark_schema()).coalesce(1), target, settings)


# Each step: (events, orders, payments) appended, then one available-now run.
STEPS = [
    (
        # c1 exactly 30 min before b1 (inclusive), c2 inside, c3 another product
        [
            ("c1", "click", "u1", "pA", 0),
            ("c2", "click", "u1", "pA", 20),
            ("c3", "click", "u1", "pB", 25),
            ("b1", "purchase", "u1", "pA", 30),
        ],
        [("o1", 0), ("o2", 5)],
        [("p1", "o1", 10), ("px", "unknown-order", 10)],
    ),
    (
        # c4 at the purchase's own instant counts
        [("c4", "click", "u1", "pA", 100), ("b2", "purchase", "u1", "pA", 100)],
        # o3 paid twice (two distinct payments); p-after pays o1 after its hour
        [("o3", 100)],
        [("p3", "o3", 101), ("p3b", "o3", 130), ("p-after", "o1", 70)],
    ),
    (
        # both sides move the watermark to 190 (it is the smaller of the two sides')
        [("c9", "click", "u2", "pZ", 200), ("b9", "purchase", "u2", "pY", 200)],
        [("o8", 200)],
        [("p8", "o8", 200)],
    ),
    (
        # late (<= 190, the watermark of the batch before): c7, c8 exactly at it, o4, p2, p4
        [
            ("c7", "click", "u1", "pA", 185),
            ("c8", "click", "u1", "pA", 190),
            ("b4", "purchase", "u1", "pA", 195),
        ],
        [("o4", 150), ("o5", 195)],
        [("p2", "o2", 20), ("p4", "o4", 160)],
    ),
    (
        # moves the watermark to 290: o5 (unpaid, hour ends at 255) is emitted
        [("c10", "click", "u3", "pQ", 300), ("b10", "purchase", "u3", "pR", 300)],
        [("o7", 300)],
        [("p7", "o7", 300)],
    ),
]


def append_step(spark, settings: Settings, step: int) -> None:
    events, orders, payments = STEPS[step]
    append_events(spark, settings, events)
    append_orders(spark, settings, orders)
    append_payments(spark, settings, payments)


def run_once(settings: Settings, state: Path) -> None:
    run_joins(settings, state / "stop", available_now=True, say=lambda _: None)


def output(spark, settings: Settings, table) -> list[tuple]:
    if not table_exists(spark, table, settings):
        return []  # a batch writes only when it emits
    return sorted(tuple(r) for r in read_table(spark, table, settings).collect())


def progress(spark, settings: Settings, query: str) -> list:
    rows = read_table(spark, PROGRESS, settings).where(f"query = '{query}'").collect()
    return sorted(rows, key=lambda r: r["batch_id"])


def forget_last_commit(settings: Settings, query: JoinQuery) -> None:
    """As if the driver died after the batch's rows were appended, before Spark recorded the
    batch as done: Spark runs it again on restart."""
    commits = Path(settings.storage.checkpoints) / JOINS / query.name / "commits"
    last = max(int(p.name) for p in commits.iterdir() if p.name.isdigit())
    (commits / str(last)).unlink()
    (commits / f".{last}.crc").unlink(missing_ok=True)


@dataclass
class Scenario:
    settings: Settings
    before_crash: dict[str, list[tuple]] = field(default_factory=dict)
    after_redo: dict[str, list[tuple]] = field(default_factory=dict)
    orders_before_last_step: list[tuple] = field(default_factory=list)
    open_before_last_step: JoinVerdict | None = None


@pytest.fixture(scope="module")
def scenario(spark, tmp_path_factory) -> Iterator[Scenario]:
    folder = tmp_path_factory.mktemp("windowed")
    base = _settings(
        "local",
        storage__root=str(folder / "lakehouse"),
        storage__checkpoints=str(folder / "checkpoints"),
    )
    joins = base.joins.model_copy(
        update={
            "watermark_delay_seconds": 600,
            "attribution_window_seconds": 1800,
            "payment_window_seconds": 3600,
        }
    )
    settings = base.model_copy(update={"joins": joins})
    found = Scenario(settings)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TRIBUTARY_STATE", str(folder / "state"))
        for step in range(len(STEPS)):
            if step == len(STEPS) - 1:
                found.orders_before_last_step = output(spark, settings, ORDER_PAYMENTS)
                found.open_before_last_step = reconcile_join(spark, settings, ORDER_PAYMENTS_QUERY)
            append_step(spark, settings, step)
            run_once(settings, folder)
            if step == 1:
                found.before_crash = {q.name: output(spark, settings, q.output) for q in QUERIES}
                for query in QUERIES:
                    forget_last_commit(settings, query)
                run_once(settings, folder)
                found.after_redo = {q.name: output(spark, settings, q.output) for q in QUERIES}
        yield found


def test_a_purchase_is_attributed_to_its_clicks_in_the_window_before_it(spark, scenario) -> None:
    rows = read_table(spark, ATTRIBUTION, scenario.settings).collect()
    pairs = sorted((r["purchase_event_id"], r["click_event_id"], r["seconds_before"]) for r in rows)
    # bounds inclusive (c1 exactly 30 minutes before, c4 at the same instant); other
    # products and users never; the late clicks c7, c8 cost their pairs with b4
    assert pairs == [("b1", "c1", 1800), ("b1", "c2", 600), ("b2", "c4", 0)]


def test_each_order_is_joined_with_its_payments_in_the_hour_after_it(spark, scenario) -> None:
    rows = read_table(spark, ORDER_PAYMENTS, scenario.settings).collect()
    paid = sorted((r["order_id"], r["payment_id"], r["paid"]) for r in rows)
    assert paid == [
        ("o1", "p1", True),  # p-after, 70 minutes after, is not o1's; px's order is unknown
        ("o2", None, False),  # p2 came late: o2 is emitted unpaid once the watermark passes
        ("o3", "p3", True),  # two distinct payments: two rows
        ("o3", "p3b", True),
        ("o5", None, False),
        ("o7", "p7", True),
        ("o8", "p8", True),
    ]


def test_the_stream_equals_the_batch_join_over_the_rows_it_read_on_time(spark, scenario) -> None:
    attribution = reconcile_join(spark, scenario.settings, ATTRIBUTION_QUERY)
    assert attribution.equal, attribution.examples
    # late: c7 and c8 (exactly at the watermark of the batch before), as Spark dropped them
    assert attribution.late == {"purchases": 0, "clicks": 2}
    assert attribution.not_emitted_for_late == 2  # (b4, c7), (b4, c8)
    orders = reconcile_join(spark, scenario.settings, ORDER_PAYMENTS_QUERY)
    assert orders.equal, orders.examples
    assert orders.late == {"orders": 1, "payments": 2}  # o4; p2, p4
    assert orders.not_emitted_for_late == 2  # (o2, p2) and (o4, p4)
    assert orders.open_orders == 0  # o7 is paid; no unpaid order within the last hour


def test_an_unpaid_order_is_emitted_once_after_the_watermark_passes_its_hour(
    spark, scenario
) -> None:
    # before the last step the watermark was 190 minutes: o5 (placed at 195) was open
    assert "o5" not in {r[0] for r in scenario.orders_before_last_step}
    verdict = scenario.open_before_last_step
    assert verdict is not None and verdict.equal and verdict.open_orders == 1
    # the last step moved it to 290 > 195 + 60: emitted in the batch without data that the
    # watermark's move called for, which --available-now ran before it ended
    rows = read_table(spark, ORDER_PAYMENTS, scenario.settings).where("order_id = 'o5'").collect()
    assert len(rows) == 1
    last = progress(spark, scenario.settings, "order_payments")[-1]
    assert rows[0]["batch_id"] == last["batch_id"]
    assert last["input_rows"] == 0 and last["output_rows"] == 1


def test_the_join_state_grows_then_shrinks_as_the_watermark_advances(spark, scenario) -> None:
    for query in QUERIES:
        recorded = progress(spark, scenario.settings, query.name)
        # every batch Spark ran is recorded, with its watermark, once
        assert [r["batch_id"] for r in recorded] == list(range(len(recorded)))
        watermarks = [r["watermark"] for r in recorded]  # as UTC wall clocks
        assert watermarks == sorted(watermarks)
        assert watermarks[-1] == at(290).replace(tzinfo=None)
        states = [r["state_rows"] for r in recorded]
        peak = states.index(max(states))
        assert max(states) > states[0] and states[-1] < max(states), (query.name, states)
        assert peak < len(states) - 1, (query.name, states)


def test_a_batch_run_again_after_a_crash_adds_nothing_twice(scenario) -> None:
    assert scenario.after_redo == scenario.before_crash
    # the batch run again emitted o2 unpaid on its first try: still once
    assert [r[0] for r in scenario.before_crash["order_payments"]] == ["o1", "o2", "o3", "o3"]


def env_of(settings: Settings, state: Path) -> dict[str, str]:
    return {
        "TRIBUTARY_PROFILE": "local",
        "TRIBUTARY__STORAGE__ROOT": settings.storage.root,
        "TRIBUTARY__STORAGE__CHECKPOINTS": settings.storage.checkpoints,
        "TRIBUTARY_STATE": str(state),
    }


def test_the_judge_job_passes_and_without_batches_has_nothing_to_compare(
    scenario, local_settings: Settings, tmp_path: Path, run_job_here: RunJob
) -> None:
    judged = run_job_here(
        "jobs.stream_joins_reconcile", **env_of(scenario.settings, tmp_path / "state")
    )
    assert judged.returncode == Exit.OK, judged.stderr[-2000:]
    result = read_result("stream_joins_reconcile", judged.stdout.splitlines())
    assert result is not None and result["equal"]
    assert result["joins"]["order_payments"]["late"] == {"orders": 1, "payments": 2}

    empty = env_of(local_settings, tmp_path / "state")
    assert run_job_here("jobs.stream_joins_reconcile", **empty).returncode == Exit.NOTHING_TO_DO
    # without its input tables the stream refuses to start, in one line
    refused = run_job_here("jobs.stream_joins", "--available-now", **empty)
    assert refused.returncode == Exit.CANNOT_RUN
    assert "no input tables yet" in refused.stderr and "silver.events" in refused.stderr


def test_the_judge_finds_a_stream_that_differs_from_its_batch_join(spark, scenario) -> None:
    # judged with a 10-minute window, the stream's (b1, c1) (30 minutes before) is not in the
    # batch join
    joins = scenario.settings.joins.model_copy(update={"attribution_window_seconds": 600})
    narrower = scenario.settings.model_copy(update={"joins": joins})
    verdict = reconcile_join(spark, narrower, ATTRIBUTION_QUERY)
    assert not verdict.equal and verdict.differing == 1
    [example] = verdict.examples
    assert example.startswith("not in the batch join") and '"click_event_id": "c1"' in example


def test_a_replay_version_joins_its_own_tables_and_equals_its_batch_join(
    spark, scenario, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every step's rows at once in a replay version's own tables, joined in one available-now
    run by the same queries: nothing is late when the whole log is read at once (b4 keeps its
    clicks c7 and c8), each join equals its batch join, and the live outputs are untouched."""
    settings = scenario.settings
    live = {q.name: output(spark, settings, q.output) for q in QUERIES}
    attribution, orders = version = queries_of("v1")
    assert attribution.output.name == "replay_v1.purchase_attribution"
    for events, placed, payments in STEPS:
        append_events(spark, settings, events, attribution.left.source)
        append_orders(spark, settings, placed, orders.left.source)
        append_payments(spark, settings, payments, orders.right.source)
    monkeypatch.setenv("TRIBUTARY_STATE", str(tmp_path / "state"))
    run_joins(settings, tmp_path / "stop", available_now=True, say=lambda _: None, queries=version)

    verdicts = reconcile_windowed_joins(spark, settings, version)
    assert [v.equal for v in verdicts] == [True, True], [v.examples for v in verdicts]
    assert [v.late for v in verdicts] == [
        {"purchases": 0, "clicks": 0},
        {"orders": 0, "payments": 0},
    ]
    rows = read_table(spark, attribution.output, settings).collect()
    assert sorted((r["purchase_event_id"], r["click_event_id"]) for r in rows) == [
        ("b1", "c1"),
        ("b1", "c2"),
        ("b2", "c4"),
        ("b4", "c7"),
        ("b4", "c8"),
    ]
    paid = {r["order_id"]: r["paid"] for r in read_table(spark, orders.output, settings).collect()}
    assert paid == {f"o{i}": i != 5 for i in (1, 2, 3, 4, 5, 7, 8)}
    assert {q.name: output(spark, settings, q.output) for q in QUERIES} == live

    # Removing the version removes the joins' tables and checkpoints: made again under the
    # same name, its joins start from nothing.
    checkpoint = Path(attribution.checkpoint(settings))
    assert checkpoint.parent.name == "replay" and checkpoint.name == "replay_v1_attribution"
    assert checkpoint.exists() and Path(orders.checkpoint(settings)).exists()
    record_version_event(spark, settings, "v1", "caught_up")
    remove(spark, settings, "v1")
    assert not checkpoint.exists() and not Path(orders.checkpoint(settings)).exists()
    assert not table_exists(spark, attribution.output, settings)


def test_a_new_checkpoint_is_refused_until_the_joins_are_reset_then_join_afresh(
    spark, local_settings: Settings, tmp_path: Path, run_job_here: RunJob
) -> None:
    """With a join's checkpoint gone, its query would read both sources from the start again
    and append every joined row a second time: the joins refuse to start, writing nothing,
    until `jobs.stream_joins --reset` removes their tables and checkpoints; then they join
    afresh, to the same rows."""
    env = env_of(local_settings, tmp_path / "state")
    append_step(spark, local_settings, 0)
    first = run_job_here("jobs.stream_joins", "--available-now", **env)
    assert first.returncode == Exit.OK, first.stderr[-2000:]
    joined = {q.name: output(spark, local_settings, q.output) for q in QUERIES}
    assert all(joined.values()), joined
    owned = [*(q.output for q in QUERIES), PROGRESS]
    versions = {t.name: table_version(local_settings, t) for t in owned}

    shutil.rmtree(ATTRIBUTION_QUERY.checkpoint(local_settings))
    refused = run_job_here("jobs.stream_joins", "--available-now", **env)
    assert refused.returncode == Exit.CANNOT_RUN, refused.stderr[-2000:]
    assert refused.stderr.startswith("stream joins: silver.purchase_attribution holds what ")
    assert "jobs.stream_joins --reset" in refused.stderr and "Traceback" not in refused.stderr
    assert {t.name: table_version(local_settings, t) for t in owned} == versions

    reset = run_job_here("jobs.stream_joins", "--reset", **env)
    assert reset.returncode == Exit.OK, reset.stderr[-2000:]
    removed = "removed silver.purchase_attribution, silver.order_payments, ops.join_progress, "
    assert removed in reset.stdout, reset.stdout
    again = run_job_here("jobs.stream_joins", "--available-now", **env)
    assert again.returncode == Exit.OK, again.stderr[-2000:]
    assert {q.name: output(spark, local_settings, q.output) for q in QUERIES} == joined
