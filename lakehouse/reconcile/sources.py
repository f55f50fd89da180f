"""The two things a reconciliation compares: sources, each a set of view tables.

A *source* names where a view's rows come from and which of them are final:

- `batch`: batch.<view> for the ranges ops.batch_runs marks final (interval_start up to
  final_until, a rerun's replacing the earlier runs' in its interval: serving's
  `coverage_of`), read at the batch table version those runs wrote;
- a *stream* (the live speed layer, or a replay's outputs, given as SpeedOutputs): its view
  tables up to its watermark minus the view's settle time, plus the late events it set aside.

Two streams rarely stop at the same point of the log: the live stream keeps reading while a
replay ends where its plan ended. A stream side is what its newest progress row says it read
(the Kafka offsets, the silver version); the accepted events one read beyond the other's end
are missing from the other on purpose too (`bound_to_common_log`), never a difference.

Loading a source for a view gives a `Side`: its rows, the accepted events those rows leave out
on purpose (`Missing`), and the ranges in which its rows are final.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from functools import reduce
from typing import TYPE_CHECKING, Literal

from pyspark.sql import functions as F

from lakehouse.core.config import Settings
from lakehouse.core.delta_io import read_table, read_table_at, table_exists
from lakehouse.core.frames import rows_frame
from lakehouse.core.tables import Table, table
from lakehouse.core.times import EPOCH, from_micros, to_micros
from lakehouse.reconcile.compare import ROWS_FROM, ROWS_TO, Missing, Range
from lakehouse.serving.serve import RunCoverage, coverage_of, merge_ranges
from lakehouse.speed.outputs import SpeedOutputs
from lakehouse.transforms.views import VIEWS, View

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

BATCH_RUNS = table("ops.batch_runs")


class UnknownSourceError(ValueError):
    pass


@dataclass(frozen=True)
class Source:
    name: str  # how reports and dq tables name the side: "batch", "speed", "replay_v3"
    kind: Literal["batch", "stream"]
    tables: dict[str, Table]  # view name -> the table holding its rows
    late: Table | None = None  # stream: the accepted events it set aside as late
    progress: Table | None = None  # stream: micro-batch progress (the watermark)
    silver: Table | None = None  # stream: every accepted event it read, once


def batch_source() -> Source:
    return Source("batch", "batch", {name: table(v.batch_table) for name, v in VIEWS.items()})


def stream_source(outputs: SpeedOutputs, name: str) -> Source:
    """The live speed layer (SpeedOutputs.live()) or a replay version's outputs."""
    return Source(
        name,
        "stream",
        {
            "event_counts_1m": outputs.counts,
            "active_users_10m": outputs.active_users,
            "user_sessions": outputs.sessions,
        },
        late=outputs.late,
        progress=outputs.progress,
        silver=outputs.silver,
    )


def speed_source() -> Source:
    return stream_source(SpeedOutputs.live(), "speed")


# Sources by the name the CLI, the job and the DAG accept; and replay:<version>.
NAMED_SOURCES = {"batch": batch_source, "speed": speed_source}
REPLAY_PREFIX = "replay:"


def named_source(name: str) -> Source:
    """`batch`, `speed` (the live speed layer) or `replay:<version>` (a replay's tables)."""
    if name.startswith(REPLAY_PREFIX):
        from lakehouse.replay.plan import ReplayRequestError, check_version_name

        version = name[len(REPLAY_PREFIX) :]
        try:
            check_version_name(version)
        except ReplayRequestError as err:
            raise UnknownSourceError(str(err)) from None
        return stream_source(SpeedOutputs.replay(version), f"replay_{version}")
    try:
        return NAMED_SOURCES[name]()
    except KeyError:
        raise UnknownSourceError(
            f"unknown source {name!r}; choose one of: {', '.join(NAMED_SOURCES)}, "
            f"{REPLAY_PREFIX}<version>"
        ) from None


@dataclass(frozen=True)
class Side:
    source: Source
    rows: DataFrame | None  # None: the table does not exist yet
    missing: Missing | None
    closed: list[Range]  # where its rows are final
    still_open: Column | None = None  # rows in those ranges that are not final yet
    read: LogPosition | None = None  # a stream: how far into the log its rows go


@dataclass(frozen=True)
class LogPosition:
    """How far a stream had read when its newest progress row was written."""

    offsets: dict[int, int]  # per partition, the next offset to read
    silver_version: int | None  # its silver table then

    def holds(self) -> Column:
        """Events (with kafka_partition, kafka_offset) within this position."""
        tests = [
            (F.col("kafka_partition") == p) & (F.col("kafka_offset") < o)
            for p, o in self.offsets.items()
        ]
        return reduce(lambda a, b: a | b, tests, F.lit(False))

    def behind(self, other: LogPosition) -> bool:
        return any(o > self.offsets.get(p, 0) for p, o in other.offsets.items())


def load_side(spark: SparkSession, settings: Settings, source: Source, v: View) -> Side:
    return load_sides(spark, settings, source, [v])[v.name]


def load_sides(
    spark: SparkSession, settings: Settings, source: Source, views: list[View]
) -> dict[str, Side]:
    """Each view's side, after reading what the source knows once for all of them (its
    watermark, or its runs), so every view is judged by the same snapshot."""
    if source.kind == "batch":
        runs = _batch_runs(spark, settings)
        newest_late = _newest_late_arrival(spark, settings)
        return {v.name: _batch_side(spark, settings, source, v, runs, newest_late) for v in views}
    # The watermark is read first: rows final under it cannot change while we read them.
    watermark, read = _latest_progress(spark, settings, source.progress)
    late = None
    if source.late is not None and table_exists(spark, source.late, settings):
        events = read_table(spark, source.late, settings)
        if read is not None:  # not those of a batch written since that progress row
            events = events.where(read.holds())
        late = Missing(events, f"late events {source.name} set aside")
    return {
        v.name: replace(_stream_side(spark, settings, source, v, watermark, late), read=read)
        for v in views
    }


def bound_to_common_log(
    spark: SparkSession,
    settings: Settings,
    lefts: dict[str, Side],
    rights: dict[str, Side],
) -> tuple[dict[str, Side], dict[str, Side]]:
    """Two streams compared: the events either read beyond the other's end join the other's
    missing events (`left + missing(left) == right + missing(right)` then holds for streams
    stopped at different points of the same log). The batch and a stream: every event beyond
    the stream's end joins the stream's missing events (`_beyond_stream`)."""
    [left, *_], [right, *_] = lefts.values(), rights.values()
    if left.read is not None and right.read is not None:
        return (
            _with_unread(spark, settings, lefts, right, left.read),
            _with_unread(spark, settings, rights, left, right.read),
        )
    if left.source.kind == "batch" and right.read is not None:
        return lefts, _beyond_stream(spark, settings, rights, right.read)
    if right.source.kind == "batch" and left.read is not None:
        return _beyond_stream(spark, settings, lefts, left.read), rights
    return lefts, rights


def _beyond_stream(
    spark: SparkSession, settings: Settings, sides: dict[str, Side], read: LogPosition
) -> dict[str, Side]:
    """A stream's sides (a replay that ended, or the live stream) compared with the batch:
    the batch reruns intervals from bronze, which the live stream keeps filling, so it may
    have read events from beyond where this stream ended. Those it read are in its rows and
    not in the stream's; those it did not are among its own missing events (late events it
    had not read) and, missing here too, cancel out. Either way they belong to the stream's
    missing events; live silver holds them all, deduplicated."""
    silver = SpeedOutputs.live().silver
    if not table_exists(spark, silver, settings):
        return sides
    beyond = read_table(spark, silver, settings).where(~read.holds())
    return _given_missing(sides, beyond, "events beyond where {} ended, which the batch may hold")


def _given_missing(sides: dict[str, Side], events: DataFrame, label: str) -> dict[str, Side]:
    """`sides` with `events` added to their missing events; `label` names them, with {} for
    the side's source."""

    def joined(side: Side) -> Missing:
        if side.missing is None:
            return Missing(events, label.format(side.source.name))
        both = side.missing.events.unionByName(events, allowMissingColumns=True)
        scoped = side.missing.scoped
        if scoped is not None:  # the new events are missing from every row (null range)
            scoped = scoped.unionByName(events, allowMissingColumns=True)
        return Missing(both, f"{side.missing.label} or {label.format(side.source.name)}", scoped)

    return {name: replace(side, missing=joined(side)) for name, side in sides.items()}


def _with_unread(
    spark: SparkSession, settings: Settings, sides: dict[str, Side], other: Side, read: LogPosition
) -> dict[str, Side]:
    """`sides` (one stream) given the events `other` read beyond `read` as missing."""
    ahead, source = other.read, other.source
    if ahead is None or not read.behind(ahead) or source.silver is None:
        return sides
    seen = read_table_at(spark, source.silver, settings, ahead.silver_version)
    if seen is None:
        return sides
    unread = seen.where(~read.holds())
    return _given_missing(sides, unread, f"events {source.name} read beyond where {{}} ended")


def _stream_side(
    spark: SparkSession,
    settings: Settings,
    source: Source,
    v: View,
    watermark: datetime | None,
    late: Missing | None,
) -> Side:
    target = source.tables[v.name]
    rows = read_table(spark, target, settings) if table_exists(spark, target, settings) else None
    if watermark is None or rows is None:
        return Side(source, rows, late, [])
    final_until = watermark - timedelta(seconds=v.settle_seconds)
    still_open = None
    if v.lookahead_seconds is None:
        # A session can still take on-time events until the watermark passes its end plus
        # the gap; a closed one is final, whatever other users' sessions do. (Holding the
        # mark at the first open session, as a range seam must, would stop at the start of
        # the busiest user's endless session.) A new session never starts before the
        # watermark, so a key absent below the mark stays absent.
        still_open = F.col("session_end") >= F.lit(final_until)
    return Side(source, rows, late, [(EPOCH, final_until)], still_open)


def _latest_progress(
    spark: SparkSession, settings: Settings, progress: Table | None
) -> tuple[datetime | None, LogPosition | None]:
    """The stream's watermark and how far it had read, from its newest progress row."""
    if progress is None or not table_exists(spark, progress, settings):
        return None, None
    latest = (
        read_table(spark, progress, settings)
        .orderBy(F.col("processed_at").desc())
        .select("watermark_micros", "offsets", "silver_version")
        .limit(1)
        .collect()
    )
    if not latest:
        return None, None
    [row] = latest
    read = LogPosition(dict(row["offsets"] or {}), row["silver_version"])
    wm = row["watermark_micros"]
    return (from_micros(wm) if wm is not None else None), read


@dataclass(frozen=True)
class _Run:
    view: str
    coverage: RunCoverage
    read_until: int  # the newest Kafka timestamp in the bronze version it read (micros)
    finished_at: int  # micros

    @property
    def order(self) -> tuple[int, int]:
        """Later runs of an interval replace earlier ones: by the version they wrote."""
        return self.coverage.table_version, self.finished_at


def _batch_runs(spark: SparkSession, settings: Settings) -> list[_Run]:
    """Every recorded batch run, from one snapshot of ops.batch_runs (as the serving layer
    reads it: the batch table versions those runs wrote hold their rows)."""
    if not table_exists(spark, BATCH_RUNS, settings):
        return []
    rows = (
        read_table(spark, BATCH_RUNS, settings)
        .select(
            "view",
            F.unix_micros("interval_start").alias("start"),
            F.unix_micros("interval_end").alias("end"),
            F.unix_micros("final_until").alias("until"),
            "table_version",
            F.unix_micros("ingest_high_water").alias("read_until"),
            F.unix_micros("finished_at").alias("finished_at"),
        )
        .collect()
    )
    return [
        _Run(
            r["view"],
            RunCoverage(
                from_micros(r["start"]),
                from_micros(r["end"]),
                from_micros(r["until"]),
                int(r["table_version"]),
            ),
            int(r["read_until"]),
            int(r["finished_at"]),
        )
        for r in rows
    ]


def _newest_late_arrival(spark: SparkSession, settings: Settings) -> int | None:
    late_table = SpeedOutputs.live().late
    if not table_exists(spark, late_table, settings):
        return None
    late = read_table(spark, late_table, settings)
    [[newest]] = late.agg(F.max(F.unix_micros("kafka_timestamp"))).collect()
    return None if newest is None else int(newest)


def _batch_side(
    spark: SparkSession,
    settings: Settings,
    source: Source,
    v: View,
    runs: list[_Run],
    newest_late: int | None,
) -> Side:
    mine = [r for r in runs if r.view == v.name]
    if not mine:
        return Side(source, None, None, [])
    ranges = coverage_of([r.coverage for r in mine])
    version = max(r.coverage.table_version for r in mine)
    rows = read_table_at(spark, source.tables[v.name], settings, version)
    missing = None
    # The usual case, decided without Spark: every late event arrived before the oldest
    # run's read. (An event no run read affects no row a run owns.)
    if newest_late is not None and newest_late > min(r.read_until for r in mine):
        scoped = _unread_late_events(spark, settings, v, mine)
        unread = scoped.drop(ROWS_FROM, ROWS_TO).dropDuplicates(["event_id"])
        missing = Missing(unread, "late events the batch had not read", scoped)
    return Side(source, rows, missing, ranges)


def _unread_late_events(
    spark: SparkSession, settings: Settings, v: View, runs: list[_Run]
) -> DataFrame:
    """Late events that reached bronze after a batch run read it, each with the rows it is
    missing from: those the run owns, [ROWS_FROM, ROWS_TO).

    The batch recomputes an interval from bronze as it was then; an event arriving later is
    in the speed layer's late events but in no batch row until the interval is recomputed.
    A row belongs to the last run over its time (a rerun replaces its interval's rows), and
    an event can be in rows of two runs (a sliding window or a session reaching across an
    hour): one that read it and one that ran before it arrived. So each run is judged for
    the rows it still owns, and only the events that could reach those rows.
    """
    owned = []
    claimed: list[Range] = []  # the intervals of the runs after this one, merged
    for run in sorted(runs, key=lambda r: r.order, reverse=True):
        pieces = [(run.coverage.start, run.coverage.end)]
        for taken_from, taken_to in claimed:
            pieces = [
                piece
                for start, end in pieces
                for piece in ((start, min(end, taken_from)), (max(start, taken_to), end))
                if piece[0] < piece[1]
            ]
        owned += [(to_micros(start), to_micros(end), run.read_until) for start, end in pieces]
        claimed = merge_ranges([*claimed, (run.coverage.start, run.coverage.end)])
    if not owned:
        owned = [(0, 0, 0)]  # no rows owned: nothing can be missing from them
    owners = rows_frame(spark, owned, "_from long, _to long, _high_water long")
    time = F.unix_micros("event_time")
    reads = time >= F.col("_from") - F.lit(v.lookback_seconds * 1_000_000)
    if v.lookahead_seconds is not None:
        reads &= time < F.col("_to") + F.lit(v.lookahead_seconds * 1_000_000)
    late = read_table(spark, SpeedOutputs.live().late, settings)
    return (
        late.join(
            F.broadcast(owners),
            reads & (F.unix_micros("kafka_timestamp") > F.col("_high_water")),
        )
        .withColumns({ROWS_FROM: F.timestamp_micros("_from"), ROWS_TO: F.timestamp_micros("_to")})
        .drop("_from", "_to", "_high_water")
    )


def batch_run_intervals(
    spark: SparkSession, settings: Settings, run_ids: list[str]
) -> tuple[list[Range], list[str]]:
    """The intervals the recorded batch runs recomputed, and the ids of those not recorded.
    What an asset-triggered reconciliation compares: what just changed."""
    if not table_exists(spark, BATCH_RUNS, settings):
        return [], run_ids
    rows = (
        read_table(spark, BATCH_RUNS, settings)
        .where(F.col("run_id").isin(run_ids))
        .groupBy("run_id")
        .agg(
            F.min(F.unix_micros("interval_start")).alias("start"),
            F.max(F.unix_micros("interval_end")).alias("end"),
        )
        .collect()
    )
    unknown = sorted(set(run_ids) - {r["run_id"] for r in rows})
    return [(from_micros(r["start"]), from_micros(r["end"])) for r in rows], unknown
