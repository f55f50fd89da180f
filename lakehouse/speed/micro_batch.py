"""What the speed layer does with one micro-batch of Kafka records (foreachBatch).

    bronze.events_raw   <- every record               (append)
    bronze.quarantine   <- records that break a rule  (append)
    silver.events       <- new accepted events        (append, deduplicated by event_id)
    speed.late_events   <- new events older than the watermark
    speed.<views>       <- new on-time events         (append: the batch's partial rows)
    ops.speed_progress  <- one row: counts, watermark, lag, freshness  (written last)

Exactly-once: every write is marked with (this output's writer id, batch id), so a batch Spark
replays after a crash skips what it already committed (delta_io.append_batch). Whenever the
batch may have been tried before (the first batch after a start, a retry) each write looks for
its mark first, and the progress row, keyed by the same pair, is looked up; a batch this
processor knows it has not begun before writes without looking. Replaying must also *decide*
the same things, so the decisions use state pinned by the previous batch's progress row: the
watermark in force and the silver version to deduplicate against. A failed write raises: the
batch fails and is retried, never half-committed and forgotten.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F

from lakehouse.core.checkpoints import checkpoint_query_id
from lakehouse.core.config import Settings
from lakehouse.core.delta_io import (
    append_rows_batch,
    append_small_batch,
    read_table_at,
    stored_layout,
    table_exists,
)
from lakehouse.core.delta_maintenance import (
    compact_small_files,
    fold_partials,
    retention_keeping,
    vacuum_replaced_files,
)
from lakehouse.core.frames import rows_frame
from lakehouse.core.small_tables import table_version as latest_version
from lakehouse.core.spark import interpreted_projections, release_local_checkpoint
from lakehouse.core.tables import Table
from lakehouse.speed.batch_state import (
    FIRSTS_SCHEMA,
    BatchStats,
    Dedup,
    PinnedState,
    StepTimer,
    batch_stats,
    new_event_arrays,
    pinned_from,
    progress_record,
)
from lakehouse.speed.outputs import SpeedOutputs
from lakehouse.speed.seen_events import (
    SeenEvents,
    fingerprint,
    position_of,
    seen_in,
)
from lakehouse.transforms.bronze import RAW_COLUMNS, to_raw_records
from lakehouse.transforms.dedup import (
    as_firsts,
    conflicting_deliveries,
    conflicting_records,
    drop_seen_events,
    first_delivery_per_event,
)
from lakehouse.transforms.lateness import (
    WatermarkRule,
    late_events,
    next_watermark,
    on_time_events,
    watermark_column,
)
from lakehouse.transforms.parse import parse_events
from lakehouse.transforms.validate import (
    ValidationRules,
    accepted_events,
    is_accepted,
    quarantined_records,
    validate_events,
)
from lakehouse.transforms.views import view

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


EndOffsets = Callable[[], dict[int, int]]
# Per table name, the oldest Delta version of it that must stay readable (serving reads a
# promoted replay version at the versions its gate passed). Asked at each vacuum: a promotion
# can happen while the stream runs.
KeptVersions = Callable[[], Mapping[str, int]]


# Which output table each write step fills.
TABLE_OF_STEP = {
    "bronze": "raw",
    "quarantine": "quarantine",
    "silver": "silver",
    "late": "late",
    "counts": "counts",
    "active_users": "active_users",
    "sessions": "sessions",
}


# The write steps of the views (SpeedOutputs fields): each computes its view's rows from the
# batch's on-time events alone (the view's `compute`), and appends them as partial rows
# (MicroBatchProcessor.append_view).
VIEW_STEPS = ("counts", "active_users", "sessions")


# The stream looks after its tables itself, each in its turn (MicroBatchProcessor.turns).
# Each batch adds one or more files to every table it writes. It compacts them all: the
# appended tables' small files into larger ones (delta_maintenance.compact_small_files),
# and the views' partial rows into their combination, a file per hour (fold_partials), so
# that what a reader combines stays small however long the stream runs.
COMPACTED = ("silver", "late", "quarantine", "raw", "progress", *VIEW_STEPS)
# It vacuums them all (delta_maintenance.vacuum_replaced_files): compactions replace
# files, a killed write leaves files it never committed, and both would otherwise stay on
# disk for ever.
VACUUMED = COMPACTED


class MicroBatchProcessor:
    def __init__(
        self,
        settings: Settings,
        outputs: SpeedOutputs,
        checkpoint: str,
        end_offsets: EndOffsets | None = None,
        kept_versions: KeptVersions | None = None,
    ) -> None:
        self.settings = settings
        self.outputs = outputs
        self.checkpoint = checkpoint
        self.end_offsets = end_offsets
        self.kept_versions = kept_versions
        self.rules = ValidationRules.of(settings)
        self.watermark_rule = WatermarkRule.of(settings)
        self._app_id: str | None = None
        # (app id, batch id, state): what the batch after the last one committed here pins,
        # so the next batch need not read it back from the progress table.
        self._committed: tuple[str, int, PinnedState] | None = None
        # The event_ids silver holds, for the silver version the next batch pins.
        self._seen: SeenEvents | None = None
        self._layouts: dict[str, tuple[str, ...]] = {}  # layout_of, by table name
        # (app id, batch id) of the last batch begun here: a batch begun again (its first try
        # failed) may have written anything.
        self._begun: tuple[str, int] | None = None

    def app_id(self, spark: SparkSession) -> str:
        # The checkpoint's query id: stable across restarts, new if the checkpoint is reset,
        # so batch ids that start again from 0 are never mistaken for ones already written.
        if self._app_id is None:
            self._app_id = f"{self.outputs.name}:{checkpoint_query_id(spark, self.checkpoint)}"
        return self._app_id

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        started = time.monotonic()
        spark = batch.sparkSession
        app = self.app_id(spark)
        # Nothing of this batch can have been written yet when this processor wrote the batch
        # before it and has not begun this one: not after a restart, nor on a retry.
        untouched = (
            self._committed is not None
            and self._committed[:2] == (app, batch_id)
            and self._begun != (app, batch_id)
        )
        self._begun = (app, batch_id)
        pinned = self.pinned_state(spark, app, batch_id)
        # How the work is run, never what it decides: the same results either way.
        small = (
            pinned.waiting is not None and pinned.waiting < self.settings.speed.small_batch_records
        )
        with interpreted_projections(spark, small):
            self.process(batch, batch_id, app, pinned, started, untouched)

    def process(
        self,
        batch: DataFrame,
        batch_id: int,
        app: str,
        pinned: PinnedState,
        started: float,
        untouched: bool,
    ) -> None:
        spark = batch.sparkSession
        out, settings = self.outputs, self.settings

        steps = StepTimer()
        # One cache holds the batch: bronze is its raw columns, so the records are neither
        # read from Kafka twice nor cached twice.
        checked = (
            batch.transform(to_raw_records)
            .transform(parse_events)
            .transform(validate_events, self.rules)
        )
        if out.raw is None:
            # No bronze copy (a replay): only a quarantined record still needs its value and
            # key, so the cache holds them for those alone. (A conflicting duplicate passed
            # validation: its quarantine row in a replay names it by position only.)
            checked = checked.withColumns(
                {c: F.when(~is_accepted(), F.col(c)) for c in ("value", "key")}
            )
        checked = checked.persist()
        raw = checked.select(*RAW_COLUMNS)
        new: DataFrame | None = None
        try:
            with steps("dedup"):
                accepted = accepted_events(checked)
                dedup = self.new_events(spark, accepted, pinned)
                # Computed once: every write below reads it. (The first deliveries silver
                # holds are rows from the driver, or none: nothing to compute again.)
                new = dedup.new.localCheckpoint()
                firsts = dedup.earlier
                added = new_event_arrays(new)
            wm = pinned.watermark_micros
            flagged = new.withColumn(
                "arrived_late",
                F.lit(False) if wm is None else F.col("event_time") < watermark_column(wm),
            )
            late = late_events(new, wm).withColumn(
                "watermark", F.lit(None).cast("timestamp") if wm is None else watermark_column(wm)
            )
            on_time = on_time_events(new, wm)
            with steps("stats"):
                stats = batch_stats(checked, added, wm, self.watermark_rule.support_events)
                conflicts = None
                if stats.duplicates:
                    conflicts = conflicting_deliveries(
                        accepted, firsts.unionByName(as_firsts(new))
                    ).localCheckpoint()
                    stats = replace(stats, conflicting=conflicts.count())
            quarantined = quarantined_records(checked)
            if conflicts is not None and stats.conflicting:
                quarantined = quarantined.unionByName(conflicting_records(checked, conflicts))
            writes: dict[str, tuple[int, Callable[[], None]]] = {}

            def partial_write(name: str) -> Callable[[], None]:
                partials_of = getattr(out, name).partials_of
                assert partials_of is not None, f"{name}: a view's table"
                compute = view(partials_of).compute
                return lambda: self.append_view(
                    spark, compute(on_time), name, app, batch_id, untouched
                )

            def append(
                frame: DataFrame, target: Table, rows: int
            ) -> tuple[int, Callable[[], None]]:
                return rows, lambda: append_small_batch(
                    *(frame, target, settings, app, batch_id, untouched),
                    rows=rows,
                    size_bytes=stats.input_bytes,
                )

            if out.raw is not None:
                writes["bronze"] = append(raw, out.raw, stats.input_rows)
            writes |= {
                "quarantine": append(
                    quarantined, out.quarantine, stats.quarantined + stats.conflicting
                ),
                "silver": append(flagged, out.silver, stats.new_events),
                "late": append(late, out.late, stats.late_events),
                **{name: (stats.on_time, partial_write(name)) for name in VIEW_STEPS},
            }
            due = [
                (name, write)
                for name, (rows, write) in writes.items()
                # A commit of nothing costs as much as a real one; skipping it is the same
                # decision on a replay, so exactly-once holds. A new table is still created.
                if rows or not table_exists(spark, getattr(out, TABLE_OF_STEP[name]), settings)
            ]

            # A table's compaction and vacuum, in their turn, follow its own write: a fold
            # rewrites the hours the write adds to, and a vacuum must not take a write's files
            # before their commit. Tables not written this batch take their turns on their own.
            looked_after = self.looked_after(spark, batch_id)

            def timed(name: str, write: Callable[[], None] | None) -> None:
                if write is not None:
                    with steps(name):
                        write()
                for turn, run in looked_after.pop(TABLE_OF_STEP.get(name, name), []):
                    with steps(turn):
                        run()

            tasks: list[tuple[str, Callable[[], None] | None]] = [*due]
            written = {TABLE_OF_STEP[name] for name, _ in due}
            tasks += [(name, None) for name in looked_after if name not in written]
            # A batch's writes are largely planning and committing on the driver, one core's
            # work each: side by side they finish sooner (bench.speed_write_threads).
            # The views, the longest writes (each aggregates the batch), start first: the
            # plain appends fill in beside them rather than hold one back until they end.
            tasks.sort(key=lambda task: task[0] not in VIEW_STEPS)
            threads = settings.speed.write_threads
            with ThreadPoolExecutor(threads) as pool:
                for done in [pool.submit(timed, name, write) for name, write in tasks]:
                    done.result()  # a failed write fails the batch
            # Written last: its row is what the next batch (or a replay of this one) pins.
            with steps("progress"):
                row = self.progress_row(spark, stats, pinned, batch_id, app, started, steps.seconds)
                # Keyed by (app_id, batch_id): looked up, not left to Delta's transaction check,
                # which costs a rebuild of the table's state every batch. Known unwritten, it is
                # appended without looking (delta_io.append_rows_batch).
                if untouched or not self.progress_written(spark, app, batch_id):
                    append_rows_batch(
                        spark, [progress_record(row)], out.progress, settings, app, batch_id, True
                    )
            self._committed = (app, batch_id + 1, pinned_from(row))
            self.seen.add(added, row["silver_version"])
        finally:
            checked.unpersist()
            if new is not None:
                release_local_checkpoint(new)

    def turns(self, batch_id: int, names: tuple[str, ...], every: int) -> list[str]:
        """Of the output tables `names` (SpeedOutputs fields), those whose turn is this batch:
        each once every `every` batches, their turns spread over that many batches so that no
        batch takes them all. Compaction and vacuum change files, never rows, so a replayed
        batch may run them again without harm."""
        mine = [n for n in names if getattr(self.outputs, n) is not None]
        return [
            n for i, n in enumerate(mine) if (batch_id + 1 + i * every // len(mine)) % every == 0
        ]

    def looked_after(
        self, spark: SparkSession, batch_id: int
    ) -> dict[str, list[tuple[str, Callable[[], None]]]]:
        """The compactions and vacuums whose turn this batch is (COMPACTED, VACUUMED), by
        table (SpeedOutputs field): each table's compaction before its vacuum."""
        out, settings, speed = self.outputs, self.settings, self.settings.speed
        turns: dict[str, list[tuple[str, Callable[[], None]]]] = {}

        def compact(target: Table) -> Callable[[], None]:
            if target.partials_of is not None and self.layout_of(spark, target):
                return lambda: fold_partials(spark, target, settings)
            return lambda: compact_small_files(
                spark, target, settings, speed.compact_files_below_mb << 20
            )

        def vacuum(target: Table, kept: int | None) -> Callable[[], None]:
            def run() -> None:
                hours = retention_keeping(spark, target, settings, speed.vacuum_after_hours, kept)
                vacuum_replaced_files(spark, target, settings, hours)

            return run

        for name in self.turns(batch_id, COMPACTED, speed.compact_every_batches):
            target = getattr(out, name)
            if table_exists(spark, target, settings):
                turns.setdefault(name, []).append((f"compact_{name}", compact(target)))
        vacuumed = self.turns(batch_id, VACUUMED, speed.vacuum_every_batches)
        kept = self.kept_versions() if vacuumed and self.kept_versions else {}
        for name in vacuumed:
            target = getattr(out, name)
            if table_exists(spark, target, settings):
                turns.setdefault(name, []).append(
                    (f"vacuum_{name}", vacuum(target, kept.get(target.name)))
                )
        return turns

    # --- decisions ---------------------------------------------------------------------

    def pinned_state(self, spark: SparkSession, app: str, batch_id: int) -> PinnedState:
        if self._committed is not None and self._committed[:2] == (app, batch_id):
            return self._committed[2]
        if not table_exists(spark, self.outputs.progress, self.settings):
            return PinnedState()
        rows = (
            spark.read.format("delta")
            .load(self.outputs.progress.path(self.settings))
            .where((F.col("app_id") == app) & (F.col("batch_id") < batch_id))
            .orderBy(F.col("batch_id").desc())
            .limit(1)
            .collect()
        )
        return pinned_from(rows[0].asDict()) if rows else PinnedState()

    def progress_written(self, spark: SparkSession, app: str, batch_id: int) -> bool:
        """Whether a try of this batch got as far as its progress row (and so wrote the rest)."""
        if not table_exists(spark, self.outputs.progress, self.settings):
            return False
        rows = spark.read.format("delta").load(self.outputs.progress.path(self.settings))
        return not rows.where((F.col("app_id") == app) & (F.col("batch_id") == batch_id)).isEmpty()

    def new_events(self, spark: SparkSession, accepted: DataFrame, pinned: PinnedState) -> Dedup:
        """Accepted events not seen before: first delivery within the batch, and not already
        in silver as it was after the previous batch, whatever its event time there."""
        unique = first_delivery_per_event(accepted)
        none_earlier = as_firsts(unique).limit(0)
        seen = read_table_at(spark, self.outputs.silver, self.settings, pinned.silver_version)
        if seen is None:
            self._seen = SeenEvents(pinned.silver_version)
            return Dedup(unique, none_earlier)
        if self._seen is None or self._seen.silver_version != pinned.silver_version:
            # A stream (re)starting, or a batch retried after a failure: from silver itself.
            self._seen = seen_in(seen, pinned.silver_version)
        h1, h2 = fingerprint()
        ids = accepted.select("event_id", h1.alias("h1"), h2.alias("h2")).toArrow()
        found = self._seen.lookup(
            ids.column("h1").to_numpy(zero_copy_only=False),
            ids.column("h2").to_numpy(zero_copy_only=False),
        )
        if not len(found.at):
            return Dedup(unique, none_earlier)
        event_ids = ids.column("event_id").to_pylist()
        rows = {
            event_ids[i]: (event_ids[i], *position_of(int(position)), int(content))
            for i, content, position in zip(found.at, found.content, found.position, strict=True)
        }
        earlier = rows_frame(spark, list(rows.values()), FIRSTS_SCHEMA)
        return Dedup(drop_seen_events(unique, earlier), earlier)

    @property
    def seen(self) -> SeenEvents:
        assert self._seen is not None, "new_events() builds it"
        return self._seen

    # --- views ---------------------------------------------------------------------------

    def append_view(
        self,
        spark: SparkSession,
        rows: DataFrame,
        name: str,
        app: str,
        batch_id: int,
        untouched: bool = False,
    ) -> None:
        """The batch's rows of a view (SpeedOutputs field `name`), appended as they are: a key
        the batch shares with earlier batches gets a second row, which readers combine
        (lakehouse.transforms.partials). A view is never read to be written."""
        target = getattr(self.outputs, name)
        layout = self.layout_of(spark, target)
        append_small_batch(rows, target, self.settings, app, batch_id, untouched, layout)

    def layout_of(self, spark: SparkSession, target: Table) -> tuple[str, ...]:
        """The table's stored layout (delta_io.stored_layout), read once: the stream is its
        one writer."""
        if target.name not in self._layouts:
            self._layouts[target.name] = stored_layout(spark, target, self.settings)
        return self._layouts[target.name]

    # --- progress --------------------------------------------------------------------------

    def progress_row(
        self,
        spark: SparkSession,
        stats: BatchStats,
        pinned: PinnedState,
        batch_id: int,
        app: str,
        started: float,
        step_seconds: dict[str, float],
    ) -> dict[str, Any]:
        offsets = {**(pinned.offsets or {}), **stats.next_offsets}
        newest = max(
            (m for m in (pinned.newest_event_micros, stats.newest_on_time) if m is not None),
            default=None,
        )
        marks = pinned.marks.merged(stats.marks, self.watermark_rule.support_events)
        next_wm = next_watermark(pinned.watermark_micros, marks, self.watermark_rule)
        lag = self.kafka_lag(offsets)
        now = datetime.now(UTC)
        duration = time.monotonic() - started
        row: dict[str, Any] = {
            "app_id": app,
            "batch_id": batch_id,
            "processed_at": now,
            "duration_seconds": duration,
            "input_rows": stats.input_rows,
            "rows_per_second": stats.input_rows / duration if duration > 0 else None,
            "quarantined": stats.quarantined,
            "duplicates": stats.duplicates,
            "conflicting_duplicates": stats.conflicting,
            "new_events": stats.new_events,
            "late_events": stats.late_events,
            "on_time_events": stats.on_time,
            "watermark_micros": next_wm,
            "newest_event_micros": newest,
            "freshness_seconds": (now.timestamp() * 1e6 - newest) / 1e6 if newest else None,
            # From the log by delta-rs (the version Spark reads too): no Spark job at the
            # end of every batch.
            "silver_version": latest_version(self.settings, self.outputs.silver),
            "offsets": offsets,
            "kafka_lag": lag,
            "total_lag": sum(lag.values()) if lag is not None else None,
            "step_seconds": step_seconds,
            "event_marks": {p: list(times) for p, times in marks.events.items()},
            "arrival_marks": dict(marks.arrivals),
        }
        return row

    def kafka_lag(self, offsets: dict[int, int]) -> dict[int, int] | None:
        """Records per partition still in Kafka behind what this batch processed."""
        if self.end_offsets is None:
            return None
        try:
            ends = self.end_offsets()
        except Exception:  # lag is reporting only; the batch's data is already committed
            return None
        return {p: max(0, end - offsets.get(p, 0)) for p, end in sorted(ends.items())}
