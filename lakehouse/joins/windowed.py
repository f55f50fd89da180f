"""The windowed stream-stream joins, as Spark Structured Streaming runs them: two queries in
one application (jobs/stream_joins.py), each over two Delta streams with a watermark on each.

    attribution     silver.events' purchases x its clicks    -> silver.purchase_attribution
    order_payments  silver.order_events' orders x silver.payments -> silver.order_payments

The join conditions are lakehouse.transforms.stream_joins', the judge's too. Spark keeps each
side's rows in its join state and evicts them once the watermark says no row they could
still match can arrive: the state stays bounded and shrinks as event time advances. The
global watermark is the smaller of the two sides' (newest event time - joins.watermark_delay);
a batch uses the one computed after the batch before it, and:

- drops an input row whose event time is at or before the watermark of the batch before it
  (Spark's "late events" watermark: the previous batch's);
- evicts, at its end, state rows no row later than its own watermark can match; an order
  evicted unmatched is emitted then, once, paid = false.

Every batch Spark runs, including a no-data batch it runs only because the watermark moved
(which is when unpaid orders are emitted), is recorded in ops.join_progress: the watermark in
force, rows in and out, the join state's rows and bytes, rows dropped as late, and the Delta
source offsets the batch read up to. From these the judge (lakehouse.joins.windowed_reconcile)
knows for every input row which batch read it and whether it was late.

Exactly-once: each batch's output is appended marked with (the query's writer id, batch id)
(delta_io.append_batch), so a batch Spark runs again after a restart adds nothing twice; the
progress rows are marked the same way. A join's output belongs to its checkpoint
(lakehouse.core.stream_outputs): a query on another is refused until `reset_joins`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F

from lakehouse.core.checkpoints import checkpoint_query_id
from lakehouse.core.config import Settings
from lakehouse.core.delta_io import append_batch, appended_rows, small_frame, table_exists
from lakehouse.core.locks import exclusive_writer
from lakehouse.core.spark import release_local_checkpoint
from lakehouse.core.storage import StorageError, ensure_bucket
from lakehouse.core.stream_outputs import check_own_outputs, replay_again, reset_outputs
from lakehouse.core.tables import JOINS, REPLAY, Table, table
from lakehouse.speed.stream import (
    QueryFailedError,
    StopRequest,
    start_spark,
    started,
    wait_for_running_batch,
)
from lakehouse.transforms.stream_joins import (
    EVENT_TIME,
    attribute_purchases,
    clicks_of,
    join_payments,
    orders_of,
    payments_of,
    purchases_of,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

EVENTS = table("silver.events")
ORDER_EVENTS = table("silver.order_events")
PAYMENTS = table("silver.payments")
ATTRIBUTION = table("silver.purchase_attribution")
ORDER_PAYMENTS = table("silver.order_payments")
PROGRESS = table("ops.join_progress")


@dataclass(frozen=True)
class Side:
    """One side of a join: the table it streams, how its rows become the join's input
    (lakehouse.transforms.stream_joins), their key and event time in the table."""

    name: str  # as in stream_joins.EVENT_TIME
    source: Table
    select: Callable[[DataFrame], DataFrame]
    key: str
    time: str


@dataclass(frozen=True)
class JoinQuery:
    """One stream-stream join: its name, output table, two sides and how they join."""

    name: str
    output: Table
    left: Side
    right: Side
    # (left input, right input, window seconds) -> joined rows
    combine: Callable[[DataFrame, DataFrame, int], DataFrame]
    window: Callable[[Settings], int]
    progress: Table = PROGRESS  # one row per batch Spark ran
    version: str | None = None  # a replay version's join (for_version); None: the live one

    def for_version(self, version: str) -> JoinQuery:
        """The same join over a replay version's own tables, `replay_<version>.*`: its events
        (jobs.replay), its order events and payments (the commerce stream replayed), into
        its own output and progress, as the replay writer."""
        stage = f"replay_{version}"

        def own(like: Table) -> Table:
            return replace(like, name=f"{stage}.{like.name.partition('.')[2]}", writer=REPLAY)

        return replace(
            self,
            output=own(self.output),
            left=replace(self.left, source=own(self.left.source)),
            right=replace(self.right, source=own(self.right.source)),
            progress=own(self.progress),
            version=version,
        )

    @property
    def lock(self) -> str:
        """The writer lock held while the join runs (lakehouse.core.locks)."""
        return JOINS if self.version is None else f"{JOINS}_replay_{self.version}"

    def checkpoint(self, settings: Settings) -> str:
        """The live join's under the stream_joins writer; a replay's beside the version's
        other checkpoints (replay_<version>_<name>)."""
        if self.version is None:
            return f"{settings.storage.checkpoints}/{JOINS}/{self.name}"
        return self.progress.checkpoint(f"replay_{self.version}_{self.name}", settings)

    def join(
        self, left_rows: DataFrame, right_rows: DataFrame, settings: Settings, watermarked: bool
    ) -> DataFrame:
        """The join of the two sources' rows (static or streaming); `watermarked`: with a
        watermark on each side's event time, as the stream runs it."""
        sides = []
        for side, rows in ((self.left, left_rows), (self.right, right_rows)):
            selected = side.select(rows)
            if watermarked:
                delay = settings.joins.watermark_delay_seconds
                selected = selected.withWatermark(EVENT_TIME[side.name], f"{delay} seconds")
            sides.append(selected)
        return self.combine(sides[0], sides[1], self.window(settings))


ATTRIBUTION_QUERY = JoinQuery(
    "attribution",
    ATTRIBUTION,
    Side("purchases", EVENTS, purchases_of, "event_id", "event_time"),
    Side("clicks", EVENTS, clicks_of, "event_id", "event_time"),
    attribute_purchases,
    lambda settings: settings.joins.attribution_window_seconds,
)
ORDER_PAYMENTS_QUERY = JoinQuery(
    "order_payments",
    ORDER_PAYMENTS,
    Side("orders", ORDER_EVENTS, orders_of, "event_id", "event_time"),
    Side("payments", PAYMENTS, payments_of, "payment_id", "paid_at"),
    join_payments,
    lambda settings: settings.joins.payment_window_seconds,
)
QUERIES = (ATTRIBUTION_QUERY, ORDER_PAYMENTS_QUERY)


def queries_of(version: str | None = None) -> tuple[JoinQuery, ...]:
    """The joins, live or over a replay version's tables."""
    return QUERIES if version is None else tuple(q.for_version(version) for q in QUERIES)


class JoinSink:
    """A join query's foreachBatch: the batch's joined rows appended once, stamped batch_id."""

    def __init__(self, settings: Settings, query: JoinQuery, checkpoint: str) -> None:
        self.settings = settings
        self.query = query
        self.checkpoint = checkpoint
        self._app_id: str | None = None
        self.output_rows: dict[int, int] = {}  # batch id -> rows the batch emitted
        # As the enrichment stream's: the batch after the last one committed here, unless
        # begun; only a batch that may have been tried before looks for its mark.
        self._next: int | None = None
        self._begun: int | None = None

    def app_id(self, spark: SparkSession) -> str:
        if self._app_id is None:
            query_id = checkpoint_query_id(spark, self.checkpoint)
            self._app_id = f"{JOINS}:{self.query.name}:{query_id}"
        return self._app_id

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        untried = self._next == batch_id and self._begun != batch_id
        self._begun = batch_id
        # Checkpointed: counted and written without running the join (and its state) twice.
        rows = batch.withColumn("batch_id", F.lit(batch_id).cast("bigint")).localCheckpoint()
        try:
            count = rows.count()
            # A batch that emits nothing writes nothing: a retry of it has nothing to double.
            if count:
                app = self.app_id(batch.sparkSession)
                append_batch(rows, self.query.output, self.settings, app, batch_id, untried=untried)
        finally:
            release_local_checkpoint(rows)
        self.output_rows[batch_id] = count
        self._next = batch_id + 1


def start_join_query(
    spark: SparkSession, settings: Settings, query: JoinQuery, available_now: bool
) -> tuple[StreamingQuery, JoinSink]:
    """The join's query over its two sources' Delta streams (from their first version on a
    first start; afterwards the checkpoint knows where it is)."""
    checkpoint = query.checkpoint(settings)
    sink = JoinSink(settings, query, checkpoint)
    left = appended_rows(spark, query.left.source, settings)
    right = appended_rows(spark, query.right.source, settings)
    writer = (
        query.join(left, right, settings, True)
        .writeStream.queryName(
            f"{JOINS}.{query.name}" if query.version is None else f"{query.lock}.{query.name}"
        )
        .foreachBatch(sink)
        .option("checkpointLocation", checkpoint)
    )
    return started(writer, settings, available_now), sink


# --- progress: one row per batch Spark ran, from the query's own progress reports ----------


def progress_row(report: dict[str, Any], query: JoinQuery, app_id: str, sink: JoinSink) -> dict:
    """An ops.join_progress row from one of Spark's progress reports (StreamingQueryProgress
    as JSON)."""
    states = report.get("stateOperators") or []
    watermark = (report.get("eventTime") or {}).get("watermark")
    sources = [
        {
            "description": s.get("description"),
            "startOffset": s.get("startOffset"),
            "endOffset": s.get("endOffset"),
        }
        for s in report.get("sources") or []
    ]
    batch_id = int(report["batchId"])
    return {
        "query": query.name,
        "app_id": app_id,
        "batch_id": batch_id,
        "processed_at": _instant(report["timestamp"]),
        "watermark": _instant(watermark) if watermark else None,
        "input_rows": int(report.get("numInputRows") or 0),
        "output_rows": sink.output_rows.get(batch_id),
        "state_rows": sum(int(s.get("numRowsTotal") or 0) for s in states),
        "state_bytes": sum(int(s.get("memoryUsedBytes") or 0) for s in states),
        "dropped_by_watermark": sum(int(s.get("numRowsDroppedByWatermark") or 0) for s in states),
        "sources": json.dumps(sources, sort_keys=True),
    }


def _instant(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


class ProgressRecorder:
    """Writes a query's new progress reports to ops.join_progress: every batch once, those
    Spark ran (with data, or without because the watermark moved); idle reports are not
    batches. A restart may re-report a batch: the mark (app id, newest batch) skips it; only
    the first write of a run looks for it."""

    def __init__(self, settings: Settings, query: JoinQuery, sink: JoinSink) -> None:
        self.settings = settings
        self.query = query
        self.sink = sink
        self.recorded = -1
        self._wrote = False

    def record(self, spark: SparkSession, running: StreamingQuery) -> None:
        if not self._wrote:
            # A restart reports again the batch it redoes: rows of batches already recorded
            # (by an earlier run of the same checkpoint) are left out.
            self.recorded = max(self.recorded, last_recorded(spark, self.settings, self.sink))
        reports = [json.loads(p.json) for p in running.recentProgress]
        new = [
            r
            for r in reports
            if "addBatch" in (r.get("durationMs") or {}) and int(r["batchId"]) > self.recorded
        ]
        if not new:
            return
        app = f"{self.sink.app_id(spark)}:progress"
        rows = [progress_row(r, self.query, self.sink.app_id(spark), self.sink) for r in new]
        newest = max(int(r["batchId"]) for r in new)
        progress = self.query.progress
        frame = small_frame(spark, rows, progress)
        append_batch(frame, progress, self.settings, app, newest, untried=self._wrote)
        self.recorded = newest
        self._wrote = True
        for report in new:
            self.sink.output_rows.pop(int(report["batchId"]), None)


def last_recorded(spark: SparkSession, settings: Settings, sink: JoinSink) -> int:
    """The newest batch of the sink's query in its progress table (-1: none)."""
    progress = sink.query.progress
    if not table_exists(spark, progress, settings):
        return -1
    rows = spark.read.format("delta").load(progress.path(settings))
    mine = rows.where((F.col("query") == sink.query.name) & (F.col("app_id") == sink.app_id(spark)))
    [[newest]] = mine.agg(F.max("batch_id")).collect()
    return -1 if newest is None else int(newest)


# Spark keeps this many progress reports per query; the recorder writes the new ones every
# RECORD_EVERY_SECONDS (a commit each) and when the queries end.
RECENT_PROGRESS = "spark.sql.streaming.numRecentProgressUpdates"
RECORD_EVERY_SECONDS = 10.0


def run_joins(
    settings: Settings,
    stop_file: Path,
    available_now: bool,
    say: Callable[[str], None],
    queries: tuple[JoinQuery, ...] = QUERIES,
) -> None:
    """Run the join queries in one Spark application, as the stream_joins writer (its lock
    held throughout), until all have ended (`available_now`: read what their sources hold
    now and settled what the watermark allows) or they are asked to stop (Ctrl-C, SIGTERM,
    `stop_file`). Raises QueryFailedError when a query stops on an error (the others are
    stopped first)."""
    stop = StopRequest(stop_file)
    if settings.storage.on_s3:
        ensure_bucket(settings)
    locks = {query.lock for query in queries}
    assert len(locks) == 1, "one application runs the joins of one version"
    with exclusive_writer(settings, locks.pop()):
        stop.stop_file.unlink(missing_ok=True)
        spark = start_spark(settings, stop)
        spark.conf.set(RECENT_PROGRESS, "1000")
        running = []
        ready = runnable(spark, settings, queries, say)
        try:
            for query in ready:
                handle, sink = start_join_query(spark, settings, query, available_now)
                running.append((handle, ProgressRecorder(settings, query, sink)))
                say(f"==> {query.name} join running (query id {handle.id})")
            say(f"==> stream joins running; stop with Ctrl-C, SIGTERM or `touch {stop_file}`")
            watch(spark, running, stop, say)
        finally:
            for handle, _ in running:
                if handle.isActive:
                    handle.stop()


def missing_sources(spark: SparkSession, settings: Settings, query: JoinQuery) -> list[Table]:
    sources = {side.source.name: side.source for side in (query.left, query.right)}
    return [t for t in sources.values() if not table_exists(spark, t, settings)]


def runnable(
    spark: SparkSession,
    settings: Settings,
    queries: tuple[JoinQuery, ...],
    say: Callable[[str], None],
) -> list[JoinQuery]:
    """The queries whose sources exist: one waiting for its inputs (the commerce stream not
    run yet) does not keep the other from running; with none, the joins cannot run."""
    ready, waiting = [], []
    for query in queries:
        missing = missing_sources(spark, settings, query)
        if missing:
            names = ", ".join(f"{t.name} (written by {t.writer})" for t in missing)
            waiting.append(f"the {query.name} join needs {names}")
        else:
            check_own_checkpoint(spark, settings, query)
            ready.append(query)
    if not ready:
        raise StorageError(f"no input tables yet: {'; '.join(waiting)}")
    for line in waiting:
        say(f"==> not started: {line}, not there yet")
    return ready


def check_own_checkpoint(spark: SparkSession, settings: Settings, query: JoinQuery) -> None:
    """OtherCheckpointError unless the join's recorded batches are its checkpoint's query's."""
    import pyarrow.compute as pc

    if query.version is None:
        fix = (
            "put that checkpoint back, or start afresh with `python -m jobs.stream_joins "
            "--reset` (it removes the joins' tables and checkpoints; the joins then read their "
            "sources from the start again)"
        )
    else:
        fix = replay_again(query.version)
    check_own_outputs(
        spark,
        settings,
        output=query.output,
        progress=query.progress,
        checkpoint=query.checkpoint(settings),
        app_prefix=f"{JOINS}:{query.name}:",
        fix=fix,
        where=pc.field("query") == query.name,
    )


def reset_joins(settings: Settings) -> list[str]:
    """Remove the live joins' outputs, their progress and their checkpoints, so that their
    next start reads their sources from the first version; WriterBusyError while they run.
    What was removed, by name."""
    tables = [*(query.output for query in QUERIES), PROGRESS]
    checkpoints = [query.checkpoint(settings) for query in QUERIES]
    return reset_outputs(settings, JOINS, tables, checkpoints)


def watch(
    spark: SparkSession,
    running: list[tuple[StreamingQuery, ProgressRecorder]],
    stop: StopRequest,
    say: Callable[[str], None],
) -> None:
    """Record progress until every query has ended or one failed; on a stop request each
    finishes its running batch first."""
    recorded_at = time.monotonic()
    while any(handle.isActive for handle, _ in running):
        time.sleep(0.2)
        if time.monotonic() - recorded_at >= RECORD_EVERY_SECONDS:
            for handle, recorder in running:
                recorder.record(spark, handle)
            recorded_at = time.monotonic()
        failed = [h for h, _ in running if not h.isActive and h.exception() is not None]
        if failed or stop:
            if stop:
                say("==> stop requested: finishing the current batches")
            for handle, _ in running:
                if handle.isActive:
                    wait_for_running_batch(handle, 600)
                    handle.stop()
    for handle, recorder in running:
        recorder.record(spark, handle)
    for handle, _ in running:
        failure = handle.exception()
        if failure is not None:
            raise QueryFailedError(str(failure).strip().splitlines()[0][:2000])
