"""The table registry: every Delta table, where it lives and which job may write it.

Jobs ask for a table by name (`table("bronze.events_raw")`) and get its location from the
configured storage root; no job contains a path. `writer` names the one Spark application
allowed to write the table (one writer per table set: lakehouse.core.locks).
"""

from __future__ import annotations

from dataclasses import dataclass

from lakehouse.core.config import Settings, get_settings


class UnknownTableError(KeyError):
    def __str__(self) -> str:
        return f"unknown table {self.args[0]!r}; known tables: {', '.join(sorted(TABLES))}"


@dataclass(frozen=True)
class Table:
    name: str  # "<stage>.<table>"
    writer: str  # the job (module under jobs/) that owns writes
    description: str
    partition_by: tuple[str, ...] = ()
    # Delta writes a checkpoint every this many commits (set when the table is created). The
    # stream's tables commit every micro-batch; distinct primes near 100 keep their
    # checkpoints (each a Spark job of its own) from landing in the same batch: at Delta's
    # default of 10 they all did, every tenth batch, which took 9.6 s against 6 s (measured).
    checkpoint_interval: int | None = None
    # Columns Delta keeps min/max statistics for (set when the table is created; None: its
    # default, the first 32). Only columns that queries filter on pay for themselves: on
    # silver, the statistics of all fifteen columns took 3 s of an 11.6 s append of 5M rows.
    stats_columns: tuple[str, ...] | None = None
    # Columns the writers add to every row, (name, SQL expression over the row's columns), to
    # partition the table by after `partition_by`; readers never see them.
    layout_columns: tuple[tuple[str, str], ...] = ()

    @property
    def layout_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.layout_columns)

    @property
    def partition_columns(self) -> tuple[str, ...]:
        return (*self.partition_by, *self.layout_names)

    @property
    def stage(self) -> str:
        return self.name.split(".", 1)[0]

    def path(self, settings: Settings | None = None) -> str:
        root = (settings or get_settings()).storage.root
        return f"{root}/{self.name.replace('.', '/')}"

    def checkpoint(self, query: str, settings: Settings | None = None) -> str:
        root = (settings or get_settings()).storage.checkpoints
        return f"{root}/{self.writer}/{query}"


def hour_of(column: str) -> str:
    """The UTC hour a timestamp falls in, as a partition value: 2026-11-25T10 (the Spark
    session's time zone is UTC, lakehouse.core.spark)."""
    return f"date_format({column}, \"yyyy-MM-dd'T'HH\")"


# The stream's views are partitioned by the hour their rows start in. A MERGE rewrites every
# file it touches, and the view's files are the output of the previous MERGE: in one
# unpartitioned table each MERGE rewrote the whole view (a 26-hour run: 157,000 session rows
# copied to change 2,000). By hour, it rewrites the hours its batch reaches (measured in
# bench.speed_aging).
WINDOW_HOUR = (("window_hour", hour_of("window_start")),)
SESSION_HOUR = (("session_hour", hour_of("session_start")),)

SPEED = "speed_layer"
BATCH = "batch_layer"
REPLAY = "replay"  # replay_<version>.* tables (SpeedOutputs.replay) and ops.replay_versions
VERSIONS = "versions"  # ops.serving_pointer: promotion, rollback, removal of replay versions
RECONCILE = "reconcile"
QUALITY = "quality"  # jobs/quality.py: Great Expectations suites on the tables' snapshots

TABLES: dict[str, Table] = {
    t.name: t
    for t in (
        Table(
            "bronze.events_raw",
            SPEED,
            "Every Kafka record as received: key, value and Kafka coordinates. The master dataset.",
            checkpoint_interval=97,
            # The batch layer reads bronze by ingest time.
            stats_columns=("kafka_timestamp", "ingested_at", "partition", "offset"),
        ),
        Table(
            "bronze.quarantine",
            SPEED,
            "Records that break the event contract: the raw record and a reason per broken rule",
            checkpoint_interval=89,
        ),
        Table(
            "silver.events",
            SPEED,
            "Accepted events, typed and deduplicated by event_id",
            partition_by=("event_date",),
            checkpoint_interval=101,
            # The speed layer's dedup looks up silver by event time.
            stats_columns=("event_time", "kafka_timestamp", "ingested_at"),
        ),
        Table(
            "speed.event_counts_1m",
            SPEED,
            "1-minute tumbling windows per event_type: events and amount sum (on-time events)",
            checkpoint_interval=103,
            layout_columns=WINDOW_HOUR,
        ),
        Table(
            "speed.active_users_10m",
            SPEED,
            "10-minute windows sliding every minute, per page: distinct users and events",
            checkpoint_interval=107,
            layout_columns=WINDOW_HOUR,
        ),
        Table(
            "speed.user_sessions",
            SPEED,
            "Per-user sessions closed by 30 minutes of inactivity: events, duration, revenue",
            checkpoint_interval=109,
            layout_columns=SESSION_HOUR,
        ),
        Table(
            "speed.late_events",
            SPEED,
            "Accepted events that arrived after the watermark had closed their windows",
            checkpoint_interval=113,
        ),
        Table(
            "ops.speed_progress",
            SPEED,
            "One row per micro-batch: counts, watermark, duration, Kafka lag, freshness",
            checkpoint_interval=83,
        ),
        Table(
            "batch.event_counts_1m",
            BATCH,
            "1-minute tumbling windows per event_type, recomputed complete from bronze",
        ),
        Table(
            "batch.active_users_10m",
            BATCH,
            "10-minute sliding windows per page, recomputed complete from bronze",
        ),
        Table(
            "batch.user_sessions",
            BATCH,
            "Per-user sessions, recomputed complete from bronze",
        ),
        Table(
            "ops.replay_versions",
            REPLAY,
            "Replay versions' life: planned (offset ranges, gaps), caught up (records, rate)",
        ),
        Table(
            "ops.serving_pointer",
            VERSIONS,
            "Which stream output the serving layer reads: one row per promotion or rollback",
        ),
        Table(
            "ops.batch_runs",
            BATCH,
            "One row per view per batch run: interval, bronze version read, final-until mark",
        ),
        Table(
            "dq.reconciliation_runs",
            RECONCILE,
            "One row per reconciliation run and view: sides, counts per status, verdict, report",
        ),
        Table(
            "dq.reconciliation_windows",
            RECONCILE,
            "Per run and view key: both sides' measures, difference, status and explanation",
        ),
        Table(
            "dq.quality_runs",
            QUALITY,
            "One row per quality run and table: version validated, verdict, broken checks, docs",
        ),
        Table(
            "dq.quality_quarantine",
            QUALITY,
            "Rows a quality run's QUARANTINE checks refused: table, version, row as JSON, reasons",
        ),
    )
}


def table(name: str) -> Table:
    try:
        return TABLES[name]
    except KeyError:
        raise UnknownTableError(name) from None
