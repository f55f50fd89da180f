"""A micro-batch's dedup against silver, on a tiny local Delta table."""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from lakehouse.core.config import Settings
from lakehouse.core.delta_io import append_once, read_table, read_table_at, table_version
from lakehouse.core.frames import rows_frame
from lakehouse.core.tables import table
from lakehouse.speed.batch_state import PinnedState
from lakehouse.speed.micro_batch import COMPACTED, VACUUMED, VIEW_STEPS, MicroBatchProcessor
from lakehouse.speed.outputs import SpeedOutputs
from lakehouse.speed.seen_events import SeenEvents, held_arrays, seen_in
from lakehouse.transforms.dedup import as_firsts, conflicting_deliveries
from tests.delta_files import age_commits, batch_engines, replaced_files, unmarked_commits
from tests.lakehouses import copied, local_lakehouse, moved_to
from tests.micro_batches import kafka_records, query_checkpoint

pytestmark = pytest.mark.slow  # make test-fast leaves it out (docs/testing.md)


def deliveries(spark, *events: tuple[str, str, int, str]):
    """Accepted events in silver's shape: (event_id, event_time, offset, page)."""

    def row(eid: str, t: str, offset: int, page: str) -> dict:
        at = datetime.fromisoformat(t)
        event = dict(event_id=eid, event_type="click", user_id="u1", session_id=None, page=page)
        event |= dict(product_id="p1", amount=None, event_time=at, sent_at=at)
        event |= dict(event_date=at.date(), kafka_partition=0, kafka_offset=offset)
        return event | dict(kafka_timestamp=at, ingested_at=at, arrived_late=False)

    return rows_frame(spark, [row(*e) for e in events], table("silver.events").spark_schema())


def test_the_first_delivery_wins_whatever_a_later_one_says(spark, local_settings) -> None:
    """A later delivery of an event_id is dropped wherever the first is (in silver at any
    event time, or earlier in the batch); one that says something else is a conflict."""
    out = SpeedOutputs.live()
    # Two commits, two files, hours apart.
    first = deliveries(spark, ("e1", "2026-03-01T10:00:00", 0, "/"))
    append_once(first, out.silver, local_settings, "t", 0)
    second = deliveries(spark, ("e2", "2026-03-01T12:30:00", 1, "/"))
    append_once(second, out.silver, local_settings, "t", 1)
    batch = deliveries(
        spark,
        # In silver two hours earlier, outside the batch's event times: a conflict.
        ("e1", "2026-03-01T12:00:00", 7, "/"),
        ("e2", "2026-03-01T12:30:00", 9, "/"),  # in silver, the same
        ("e3", "2026-03-01T12:10:00", 10, "/"),  # new
        ("e3", "2026-03-01T12:10:00", 11, "/"),  # delivered again in the batch
        ("e4", "2026-03-01T12:15:00", 12, "/a"),  # new
        ("e4", "2026-03-01T12:15:00", 13, "/b"),  # delivered again, another page: a conflict
    ).drop("arrived_late")
    processor = MicroBatchProcessor(local_settings, out, "unused")
    pinned = PinnedState(silver_version=table_version(spark, out.silver, local_settings))

    dedup = processor.new_events(spark, batch, pinned)

    new = dedup.new.orderBy("kafka_offset").collect()
    assert [(r["event_id"], r["kafka_offset"]) for r in new] == [("e3", 10), ("e4", 12)]
    firsts = dedup.earlier.unionByName(as_firsts(dedup.new))
    conflicts = conflicting_deliveries(batch, firsts).orderBy("kafka_offset").collect()
    assert [(r["kafka_offset"], r["first_offset"]) for r in conflicts] == [(7, 0), (13, 12)]


def test_the_state_a_batch_leaves_in_memory_is_what_the_next_batch_would_read_back(
    spark, streamed: Streamed
) -> None:
    """Batch 1 of the module's stream: the state it left in memory, and what a processor
    reads back from the lakehouse that batch left."""
    assert streamed.committed is not None
    app, next_batch, remembered = streamed.committed
    assert next_batch == 2
    settings = streamed.plain
    read_back = MicroBatchProcessor(settings, SpeedOutputs.live(), "unused").pinned_state(
        spark, app, next_batch
    )
    assert remembered == read_back
    assert read_back.offsets == {0: 60}
    assert read_back.waiting == 40
    assert read_back.silver_version == table_version(spark, SpeedOutputs.live().silver, settings)
    # The event_ids it knows silver holds: what a restarted stream reads from silver.
    silver = read_table_at(spark, SpeedOutputs.live().silver, settings, read_back.silver_version)
    assert silver is not None
    rebuilt = seen_in(silver, read_back.silver_version)
    assert streamed.seen.silver_version == rebuilt.silver_version
    assert len(streamed.seen) == len(rebuilt) == silver.count() == 60
    every_id = held_arrays(silver)

    def held(seen: SeenEvents) -> list[tuple[int, int, int]]:
        found = seen.lookup(every_id["h1"], every_id["h2"])
        return sorted(
            zip(*(a.tolist() for a in (found.at, found.content, found.position)), strict=True)
        )

    assert held(streamed.seen) == held(rebuilt)
    assert len(held(rebuilt)) == 60


def events_at(
    start: datetime, count: int, seconds_apart: int, users: int = 3, user: str | None = None
) -> list:
    """Clean events `seconds_apart` apart from `start`, as (key, event) pairs, from users
    u0..u<users-1> in turn (or all from `user`)."""
    from datetime import timedelta

    events = []
    for i in range(count):
        at = start + timedelta(seconds=i * seconds_apart)
        who = user or f"u{i % users}"
        iso = at.isoformat().replace("+00:00", "Z")
        events.append(
            (
                who,
                {
                    "event_id": f"{who}-{at:%H%M%S}-{i}",
                    "event_type": "purchase" if i % 4 == 3 else "page_view",
                    "user_id": who,
                    "session_id": f"{who}-s",
                    "page": f"/p{i % 2}",
                    "product_id": "p001" if i % 4 == 3 else None,
                    "amount": 10.0 if i % 4 == 3 else None,
                    "event_time": iso,
                    "sent_at": iso,
                },
            )
        )
    return events


def first_commit_files(table_path: str) -> list[Path]:
    log = Path(table_path, "_delta_log", f"{0:020d}.json")
    actions = [json.loads(line) for line in log.read_text().splitlines()]
    return [Path(table_path, a["add"]["path"]) for a in actions if "add" in a]


def files_holding(spark, view, settings, condition: str) -> set[str]:
    from pyspark.sql import functions as F

    rows = spark.read.format("delta").load(view.path(settings)).where(condition)
    return {r[0] for r in rows.select(F.input_file_name()).distinct().collect()}


def test_a_batch_neither_reads_nor_rewrites_the_views_it_appends_to(
    spark, local_settings, tmp_path
) -> None:
    """A batch appends its views' partial rows (their windows and sessions as its own events
    make them) and reads no view: the first hour's files outlive a batch three hours on, and a
    batch adding to windows and sessions that began before the watermark does not notice
    that the first batch's files were moved away. Back in place, the views read every window
    and session once, as computed from all the events at once."""
    from datetime import UTC, timedelta

    from pyspark.sql import functions as F

    from lakehouse.transforms.sessions import sessionize
    from lakehouse.transforms.validate import AMOUNT_TYPE
    from lakehouse.transforms.windows import active_users_per_page, count_events_per_minute

    checkpoint = query_checkpoint(tmp_path / "checkpoint", "query-2")
    out = SpeedOutputs.live()
    processor = MicroBatchProcessor(local_settings, out, str(checkpoint), lambda: {})
    start = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=4)

    def at(hours: int, minutes: int, seconds: int = 0) -> datetime:
        return start + timedelta(hours=hours, minutes=minutes, seconds=seconds)

    batches = [
        # A visitor who leaves within the first hour; three users busy through hours 1 and 2.
        events_at(at(0, 0), 6, 300, user="early") + events_at(at(1, 0), 24, 300),
        # Hour 3: the busy users' sessions go on, new windows open, one more event in the last
        # minute seen (every view has rows to update, not only to insert) and one lone visit.
        # Up to 3:11, so that the watermark ends at 3:01.
        events_at(at(2, 55, 30), 4, 1)
        + events_at(at(3, 0), 12, 60)
        + events_at(at(2, 59), 1, 20, user="lone"),
        # On time, but in windows and sessions that began before the watermark: those rows
        # must be found and updated in place (a bound too tight would insert them again).
        events_at(at(3, 3, 30), 12, 20) + events_at(at(3, 3, 40), 1, 20, user="lone"),
    ]
    offsets = list(itertools.accumulate(len(b) for b in batches))
    first_hour = [
        (out.counts, "window_start"),
        (out.active_users, "window_start"),
        (out.sessions, "session_start"),
    ]

    def first_hour_files(view, column) -> set[str]:
        return files_holding(spark, view, local_settings, f"{column} < '{at(1, 0):%F %T}'")

    processor(kafka_records(spark, batches[0], 0), 0)
    before = {view.name: first_hour_files(view, column) for view, column in first_hour}
    assert all(before.values()), before
    processor(kafka_records(spark, batches[1], offsets[0]), 1)
    assert table_version(spark, out.sessions, local_settings) == 1, "the batch appended"
    for view, column in first_hour:
        after = first_hour_files(view, column)
        assert after == before[view.name], f"{view.name}: the first hour was rewritten"

    aside = tmp_path / "aside"
    moved = []
    for view, _ in first_hour:
        for path in first_commit_files(view.path(local_settings)):
            target = aside / view.name / path.name
            target.parent.mkdir(parents=True, exist_ok=True)
            path.rename(target)
            moved.append((target, path))
    # Among them, the first hour's files, still read by the views (file names are unique).
    moved_names = {path.name for _, path in moved}
    for view, _ in first_hour:
        assert {f.rsplit("/", 1)[-1] for f in before[view.name]} <= moved_names, view.name
    processor(kafka_records(spark, batches[2], offsets[1]), 2)
    for target, path in moved:
        target.rename(path)

    accepted = (
        rows_frame(spark, [json.dumps(event) for batch in batches for _, event in batch], "string")
        .select(
            F.from_json(
                "value",
                "event_type string, user_id string, page string, "
                f"amount {AMOUNT_TYPE.simpleString()}, event_time timestamp",
            ).alias("e")
        )
        .select("e.*")
    )

    def same(view_rows, expected, key: list[str]) -> None:
        got = view_rows.orderBy(*key).collect()
        want = expected.select(*view_rows.columns).orderBy(*key).collect()
        assert got == want

    read = lambda t: read_table(spark, t, local_settings)  # noqa: E731
    same(read(out.counts), count_events_per_minute(accepted), ["window_start", "event_type"])
    same(
        read(out.active_users).drop("users"),
        active_users_per_page(accepted).drop("users"),
        ["window_start", "page"],
    )
    same(read(out.sessions), sessionize(accepted), ["user_id", "session_start"])


def test_one_event_far_ahead_of_its_partition_turns_nothing_late(
    spark, local_settings, tmp_path
) -> None:
    """One record two hours ahead of the rest of its partition (an event_id reused with a new
    time, one current event among a backlog) is counted in its window, and does not move the
    watermark: the events minutes behind it that follow are on time, not late."""
    from datetime import UTC, timedelta

    from lakehouse.transforms.lateness import MICROS

    checkpoint = query_checkpoint(tmp_path / "checkpoint", "query-5")
    out = SpeedOutputs.live()
    processor = MicroBatchProcessor(local_settings, out, str(checkpoint), lambda: {})
    start = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(hours=3)
    steady = events_at(start, 20, 10)
    ahead = events_at(start + timedelta(hours=2), 1, 1, user="ahead")
    processor(kafka_records(spark, steady + ahead, 0), 0)
    following = events_at(start + timedelta(minutes=5), 20, 10)
    processor(kafka_records(spark, following, len(steady) + 1), 1)

    progress = read_table(spark, out.progress, local_settings).orderBy("batch_id").collect()
    assert [r["late_events"] for r in progress] == [0, 0]
    support = local_settings.speed.watermark_support_events
    # The event ahead is the newest of the five the watermark waits for.
    fifth_newest = start + timedelta(seconds=10 * (len(steady) - support + 1))
    lateness = local_settings.speed.allowed_lateness_seconds
    assert progress[0]["watermark_micros"] == (int(fifth_newest.timestamp()) - lateness) * MICROS
    counted = read_table(spark, out.counts, local_settings).agg(F.sum("events")).first()
    assert counted is not None and counted[0] == len(steady) + 1 + len(following)


def with_speed(settings: Settings, **speed: int) -> Settings:
    return settings.model_copy(update={"speed": settings.speed.model_copy(update=speed)})


@pytest.mark.parametrize("kind", ["compact", "vacuum"])
def test_each_table_takes_its_turn_once_every_n_batches_never_all_at_once(local_settings, kind):
    names = {"compact": COMPACTED, "vacuum": VACUUMED}[kind]
    live = MicroBatchProcessor(local_settings, SpeedOutputs.live(), "unused")
    turns = {batch_id: live.turns(batch_id, names, 4) for batch_id in range(12)}
    for name in names:
        batch_ids = [b for b, taken in turns.items() if name in taken]
        assert len(batch_ids) == 3
        assert {later - earlier for earlier, later in itertools.pairwise(batch_ids)} == {4}
    assert max(len(taken) for taken in turns.values()) < len(names)
    # A replay keeps no copy of the records: there is no raw table to look after.
    replay = MicroBatchProcessor(local_settings, SpeedOutputs.replay("v1"), "unused")
    assert all("raw" not in replay.turns(b, names, 4) for b in range(12))


def contents(spark, table, settings) -> list[str]:
    """A table's rows as readers read them, in a stable order, without ingest times (they
    differ between runs)."""
    rows = read_table(spark, table, settings).drop("ingested_at").collect()
    return sorted(repr(r) for r in rows)


# Every table a live stream writes: it vacuums them all.
TABLE_NAMES = VACUUMED
# The tables whose files a compaction replaces in the test stream's batch 1: silver's two
# files, and the views' partial rows of the hours both batches reached (a fold).
REPLACING = ("silver", "counts", "active_users", "sessions")
# The tables whose rows a compaction must leave as they were.
COMPARED = ("raw", "silver", "counts", "active_users", "sessions")


@dataclass(frozen=True)
class Streamed:
    """Micro-batches 0 and 1 (30 events each) by a stream that compacts and vacuums one table,
    in batch 1, with a week's retention (`plain`); and batch 1 again, from a copy of what
    batch 0 left, by a stream that compacts and vacuums every table in it with no retention
    (`looked_after`)."""

    batches: list  # the three batches (Kafka records): both streams read the very same
    event_ids: list[str]
    plain_folder: Path  # nothing writes to it: copy it
    plain: Settings
    committed: tuple[str, int, PinnedState] | None  # the state batch 1 left in memory
    seen: SeenEvents  # the event_ids it knew silver held then
    kept_by_plain: tuple[str, set[str]]  # the table plain vacuumed, and its replaced files
    looked_after: Settings
    rows_after_compaction: dict[str, list[str]]  # `looked_after`'s rows after batch 1
    raw_files_after_compaction: int


@pytest.fixture(scope="module")
def streamed(spark, tmp_path_factory) -> Streamed:
    from datetime import UTC, timedelta

    from lakehouse.generator.clickstream import generate_events

    folder = tmp_path_factory.mktemp("streamed")
    # From the start of a minute: batches 0 and 1 (each about 30 s of events) share it, so
    # batch 1 updates rows of every view (a MERGE that only inserts replaces no file).
    start = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=30)
    events = list(generate_events(90, seed=8, start=start, users=4))
    # Built once: both streams get the same records, Kafka timestamps included.
    batches = [kafka_records(spark, events[i : i + 30], i) for i in range(0, 90, 30)]
    out = SpeedOutputs.live()

    def stream(settings: Settings) -> MicroBatchProcessor:
        checkpoint = Path(settings.storage.checkpoints) / "query"
        if not checkpoint.exists():
            query_checkpoint(checkpoint, "query-3")
        # 100 records in the log: the lag the progress rows report.
        return MicroBatchProcessor(settings, out, str(checkpoint), lambda: {0: 100})

    # Compactions and vacuums in turns of 8 batches: in batch 1, one of the 8 tables takes both.
    plain = with_speed(
        local_lakehouse(folder / "plain"),
        compact_every_batches=len(COMPACTED),
        vacuum_every_batches=len(VACUUMED),
        vacuum_after_hours=168,
    )
    processor = stream(plain)
    [vacuumed] = processor.turns(1, VACUUMED, len(VACUUMED))
    assert processor.turns(1, COMPACTED, len(COMPACTED)) == [vacuumed]
    assert vacuumed in REPLACING
    processor(batches[0], 0)
    # A stream restarted on this copy reads its state back from the progress table.
    looked_after = moved_to(plain, copied(folder / "plain", folder / "looked-after"))
    processor(batches[1], 1)

    every_batch = {"compact_every_batches": 1, "vacuum_every_batches": 1}
    stream(with_speed(looked_after, **every_batch, vacuum_after_hours=0))(batches[1], 1)
    rows = {name: contents(spark, getattr(out, name), looked_after) for name in COMPARED}
    raw_files = len(spark.read.format("delta").load(out.raw.path(looked_after)).inputFiles())
    return Streamed(
        batches=batches,
        event_ids=[e["event_id"] for _, e in events],
        plain_folder=folder / "plain",
        plain=plain,
        committed=processor._committed,
        seen=processor.seen,
        kept_by_plain=(
            vacuumed,
            replaced_files(spark, getattr(out, vacuumed).path(plain)),
        ),
        looked_after=looked_after,
        rows_after_compaction=rows,
        raw_files_after_compaction=raw_files,
    )


def test_compacting_while_streaming_changes_files_never_rows(spark, streamed: Streamed) -> None:
    """The same batches leave the same rows whether the stream compacts (and vacuums) every
    table in a batch or not."""
    out = SpeedOutputs.live()
    plain = {name: contents(spark, getattr(out, name), streamed.plain) for name in COMPARED}
    assert streamed.rows_after_compaction == plain
    # Compacted in the batch, after its append: one file.
    assert streamed.raw_files_after_compaction == 1
    progress = spark.read.format("delta").load(out.progress.path(streamed.looked_after))
    steps = set(progress.where("batch_id = 1").first()["step_seconds"])
    assert {f"compact_{name}" for name in COMPACTED} | {f"vacuum_{n}" for n in VACUUMED} <= steps
    # Committed by delta-rs: a table's compaction as OPTIMIZE, a view's fold as an overwrite
    # of its crowded hours.
    raw = unmarked_commits(spark, out.raw.path(streamed.looked_after))
    assert ("OPTIMIZE", "delta-rs") in raw, raw
    for name in VIEW_STEPS:
        commits = unmarked_commits(spark, getattr(out, name).path(streamed.looked_after))
        assert ("WRITE", "delta-rs") in commits, (name, commits)
    # A view's compaction folds its partial rows: a row per key, a file per hour. The plain
    # stream, which folded at most one view, keeps a key's rows from both batches.
    for name in VIEW_STEPS:
        for settings, folded in ((streamed.looked_after, True), (streamed.plain, False)):
            target = getattr(out, name)
            stored = spark.read.format("delta").load(target.path(settings))
            rows = read_table(spark, target, settings).count()
            if folded:
                assert stored.count() == rows, name
                hours = stored.select(*target.layout_names).distinct().count()
                assert len(stored.inputFiles()) == hours, name
            elif name != streamed.kept_by_plain[0]:
                assert stored.count() > rows, f"{name}: batch 1 shares keys with batch 0"


def test_a_batch_known_unbegun_commits_its_few_rows_through_delta_rs(
    spark, streamed: Streamed
) -> None:
    """Batch 0 creates every table through Spark. Batch 1 (30 records, fewer than
    speed.delta_rs_append_rows), which the processor that wrote batch 0 knows it has not
    begun, commits its records, its events, its views' partial rows and its progress row
    through delta-rs. Batch 1 on a restarted stream (`looked_after`) may have been tried
    before: it looks for its marks and appends through Spark; its progress row, once looked
    up, is known unwritten."""
    out = SpeedOutputs.live()
    assert streamed.plain.speed.delta_rs_append_rows >= 30
    appended = ("raw", "silver", *VIEW_STEPS)
    for name in (*appended, "progress"):
        path = getattr(out, name).path(streamed.plain)
        assert batch_engines(spark, path) == {0: "spark", 1: "delta-rs"}, name
    for name in appended:
        assert batch_engines(spark, getattr(out, name).path(streamed.looked_after))[1] == "spark"
    assert batch_engines(spark, out.progress.path(streamed.looked_after))[1] == "delta-rs"


def removed_files(table_path: str) -> set[str]:
    """The files the table's commits removed (replaced), by the log."""
    found = set()
    for commit in Path(table_path, "_delta_log").glob("*.json"):
        for line in commit.read_text().splitlines():
            action = json.loads(line)
            if "remove" in action:
                found.add(action["remove"]["path"])
    return found


def test_the_stream_deletes_the_files_it_replaced_once_they_are_old_enough(
    spark, streamed: Streamed
) -> None:
    """Every compaction (of a view: a fold) replaces files; the stream vacuums its
    tables in their turns, so what they keep on disk does not grow without end. With no
    retention, a batch deletes every file it and the batches before replaced; within the
    retention (a week), replaced files stay: older versions can still be read."""
    out = SpeedOutputs.live()
    for name in REPLACING:
        path = getattr(out, name).path(streamed.looked_after)
        assert removed_files(path), f"{name}: batch 1 replaced files (else nothing is proven)"
        assert replaced_files(spark, path) == set(), name
    kept, replaced = streamed.kept_by_plain
    assert replaced, f"{kept}: replaced in batch 1, vacuumed with a week's retention, kept"
    assert replaced <= removed_files(getattr(out, kept).path(streamed.plain))


def test_a_batch_retried_after_a_week_s_stop_reads_silver_as_it_was(
    spark, streamed: Streamed, tmp_path
) -> None:
    """A batch reads silver as the previous batch left it. When the batch failed after its
    silver append (a write beside it failed, or the process was killed) and the stream then
    stayed stopped for over a week, that version is no longer silver's latest and is more than
    the table's deletedFileRetentionDuration (7 days) old: Delta 4 refuses by default to read
    it, and the stream could never start again. Batches 0 and 1 are the module's stream's,
    in a copy of what they left.

    The batch writes its tables side by side (speed.write_threads): the one failed write must
    still fail the batch before its progress row, and the retry must skip what the others
    committed. Its first try is the running stream's, which committed batch 1 and so writes
    batch 2 without looking for an earlier try: the retry, after a restart, must find those
    writes by their marks."""

    settings = moved_to(streamed.plain, copied(streamed.plain_folder, tmp_path / "copy"))
    out = SpeedOutputs.live()
    checkpoint = str(Path(settings.storage.checkpoints) / "query")
    batch = streamed.batches[2]
    # Batch 2 fails after silver's append: its counts table is blocked by a file.
    blocked_out = replace(out, counts=replace(out.counts, name="tests.blocked_counts"))
    blocked = Path(blocked_out.counts.path(settings))
    blocked.parent.mkdir(parents=True, exist_ok=True)
    blocked.write_text("a file where the table's folder should be")
    assert settings.speed.write_threads > 1
    running = MicroBatchProcessor(settings, blocked_out, checkpoint, lambda: {})
    running._committed, running._seen = streamed.committed, streamed.seen
    with pytest.raises(Exception, match="blocked_counts"):
        running(batch, 2)
    assert streamed.committed is not None
    left = streamed.committed[2].silver_version
    assert left is not None and left < table_version(spark, out.silver, settings), "written"
    progress = read_table(spark, out.progress, settings)
    assert progress.where("batch_id = 2").count() == 0, "the batch did not complete"
    appended = {n: table_version(spark, getattr(out, n), settings) for n in ("raw", "silver")}
    for name in ("raw", "quarantine", "silver", "active_users", "sessions", "late", "progress"):
        target = getattr(out, name).path(settings)
        if Path(target).exists():
            age_commits(target, days=8)
    blocked.unlink()

    retry = MicroBatchProcessor(settings, blocked_out, checkpoint, lambda: {})
    retry(batch, 2)

    def rows() -> dict[str, list[str]]:
        return {n: contents(spark, getattr(blocked_out, n), settings) for n in TABLE_NAMES}

    written = rows()
    # And once more, as Spark replays a batch it had not recorded as done: nothing is written
    # (its turn to vacuum a table may come again: that changes files, not rows).
    retry(batch, 2)

    assert rows() == written
    progress = read_table(spark, out.progress, settings)
    assert progress.where("batch_id = 2").count() == 1
    assert appended == {n: table_version(spark, getattr(out, n), settings) for n in appended}
    silver = read_table(spark, out.silver, settings).select("event_id").collect()
    assert sorted(r["event_id"] for r in silver) == sorted(streamed.event_ids)
    counted = read_table(spark, blocked_out.counts, settings).agg(F.sum("events")).first()
    assert counted is not None and counted[0] == len(streamed.event_ids) // 3, "batch 2's events"
