"""The table registry: every Delta table, its schema, where it lives and which job writes it.

Jobs ask for a table by name (`table("bronze.events_raw")`) and get its location from the
configured storage root; no job contains a path. `schema` is the table's columns as readers see
them, declared here once: every write is checked against it and conformed to its column order
(lakehouse.core.delta_io), so the first write creates the table with exactly these columns.
`writer` names the one Spark application allowed to write the table (one writer per table
set: lakehouse.core.locks).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from lakehouse.cdc.shop import CAPTURED, CapturedTable
from lakehouse.core.config import Settings, get_settings

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.types import StructType


class UnknownTableError(KeyError):
    def __str__(self) -> str:
        return f"unknown table {self.args[0]!r}; known tables: {', '.join(sorted(TABLES))}"


@dataclass(frozen=True)
class Table:
    name: str  # "<stage>.<table>"
    writer: str  # the job (module under jobs/) that owns writes
    description: str
    schema: str  # Spark DDL: "name type, ..." (no layout columns)
    partition_by: tuple[str, ...] = ()
    # Delta writes a checkpoint every this many commits (set when the table is created). The
    # stream's tables commit every micro-batch; distinct primes keep their checkpoints (each a
    # Spark job of its own) from landing in the same micro-batch.
    checkpoint_interval: int | None = None
    # Columns Delta keeps min/max statistics for (set when the table is created; None: its
    # default, the first 32). Only columns that queries filter on pay for their cost.
    stats_columns: tuple[str, ...] | None = None
    # Columns the writers add to every row, (name, SQL expression over the row's columns), to
    # partition the table by after `partition_by`; readers never see them.
    layout_columns: tuple[tuple[str, str], ...] = ()
    # The view (lakehouse.transforms.views) whose partial rows the table holds: a key may have
    # a row per micro-batch that reached it, and readers combine them (delta_io.read_table).
    partials_of: str | None = None

    @property
    def layout_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.layout_columns)

    @property
    def partition_columns(self) -> tuple[str, ...]:
        return (*self.partition_by, *self.layout_names)

    def spark_schema(self) -> StructType:
        from pyspark.sql.types import StructType

        parsed = StructType.fromDDL(self.schema)
        assert isinstance(parsed, StructType)
        return parsed

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


def hour_value(times: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """hour_of, of times on the driver (Arrow timestamps in UTC)."""
    import pyarrow.compute as pc

    return pc.strftime(times, format="%Y-%m-%dT%H")


# The stream's views are partitioned by the hour their rows start in: a fold of their partial
# rows (delta_maintenance.fold_partials) rewrites only the hours that hold more than one file.
WINDOW_HOUR = (("window_hour", hour_of("window_start")),)
SESSION_HOUR = (("session_hour", hour_of("session_start")),)

SPEED = "speed_layer"
BATCH = "batch_layer"
REPLAY = "replay"  # replay_<version>.* tables (SpeedOutputs.replay) and ops.replay_versions
VERSIONS = "versions"  # ops.serving_pointer: promotion, rollback, removal of replay versions
RECONCILE = "reconcile"
QUALITY = "quality"  # jobs/quality.py: Great Expectations suites on the tables' snapshots
CDC = "cdc"  # the changelog stream: bronze.<table>_changes, silver.<table>_current/_history
ENRICH = "enrich"  # the enrichment stream: silver.events_enriched and its revenue view
COMMERCE = "commerce"  # the commerce stream: payments, order events, the order state they fold to
JOINS = "stream_joins"  # the windowed stream-stream joins: attribution, orders with payments

# Column sets several tables share.
EVENT = (
    "event_id string, event_type string, user_id string, session_id string, page string, "
    "product_id string, amount decimal(18,2), event_time timestamp, sent_at timestamp, "
    "event_date date, kafka_partition int, kafka_offset bigint, kafka_timestamp timestamp, "
    "ingested_at timestamp"
)
# A record's key and value as received: bytes (lakehouse.transforms.bronze).
RAW = (
    "key binary, value binary, topic string, partition int, offset bigint, "
    "kafka_timestamp timestamp, ingested_at timestamp"
)
QUARANTINE = (
    "topic string, kafka_partition int, kafka_offset bigint, kafka_timestamp timestamp, "
    "key binary, value binary, value_bytes int, reasons array<string>, reason string, "
    "quarantined_at timestamp"
)
EVENT_COUNTS = (
    "window_start timestamp, window_end timestamp, event_type string, events bigint, "
    "amount_sum decimal(18,2)"
)
ACTIVE_USERS = (
    "window_start timestamp, window_end timestamp, page string, users array<string>, "
    "active_users int, events bigint"
)
SESSIONS = (
    "user_id string, session_start timestamp, session_end timestamp, events bigint, "
    "revenue decimal(18,2), duration_seconds bigint"
)
PROGRESS = (
    "app_id string, batch_id bigint, processed_at timestamp, duration_seconds double, "
    "input_rows bigint, rows_per_second double, quarantined bigint, duplicates bigint, "
    "new_events bigint, late_events bigint, on_time_events bigint, watermark_micros bigint, "
    "newest_event_micros bigint, freshness_seconds double, silver_version bigint, "
    "offsets map<int,bigint>, kafka_lag map<int,bigint>, total_lag bigint, "
    "step_seconds map<string,double>, watermark timestamp, newest_event_time timestamp, "
    "event_marks map<int,array<bigint>>, arrival_marks map<int,bigint>, "
    "conflicting_duplicates bigint"
)
VERSION_EVENTS = (
    "version string, event string, at timestamp, by string, topic string, start string, "
    "start_offsets map<int,bigint>, end_offsets map<int,bigint>, gaps map<int,bigint>, "
    "forced boolean, records bigint, seconds double, rate double, watermark_micros bigint, "
    "note string"
)
POINTER = (
    "at timestamp, action string, version string, previous string, active string, "
    "forced boolean, gate string, by string, pins map<string,bigint>"
)
FIRST_DELIVERIES = (
    "event_id string, kafka_partition int, kafka_offset bigint, ingested_at timestamp"
)
REDELIVERIES = "kafka_partition int, kafka_offset bigint, event_id string"
BATCH_RUNS = (
    "run_id string, view string, interval_start timestamp, interval_end timestamp, "
    "final_until timestamp, rows bigint, table_version bigint, bronze_version bigint, "
    "ingest_high_water timestamp, watermark timestamp, events bigint, started_at timestamp, "
    "finished_at timestamp, duration_seconds double"
)
MEASURE = "struct<left: double, right: double, difference: double, unexplained: double>"
RECONCILIATION_WINDOWS = (
    "run_id string, view string, left_source string, right_source string, "
    f"key map<string,string>, window_time timestamp, measures map<string,{MEASURE}>, "
    "status string, beyond_threshold boolean, explanation string"
)
RECONCILIATION_RUNS = (
    "run_id string, view string, left_source string, right_source string, "
    "started_at timestamp, range_start timestamp, range_end timestamp, compared bigint, "
    "equal bigint, explained bigint, unexplained bigint, beyond_threshold bigint, open bigint, "
    "verdict string, verdict_reasons array<string>, first_windows array<string>, "
    "thresholds map<string,double>, max_unexplained_windows bigint, report_path string, "
    "note string"
)
QUALITY_RUNS = (
    "run_id string, table_name string, table_version bigint, verdict string, "
    "range_start timestamp, range_end timestamp, failures map<string,bigint>, "
    "broken string, quarantined bigint, seconds double, data_docs string, checked_at timestamp"
)
QUALITY_QUARANTINE = (
    "run_id string, table_name string, table_version bigint, row string, "
    "reasons array<string>, reason string, checked_at timestamp"
)

# A change as Debezium sent it (lakehouse.transforms.changes): the record's bytes and position,
# and what parsing read from it. A tombstone (null value after a delete) has no op and no
# source fields.
CHANGES = (
    "topic string, partition int, offset bigint, kafka_timestamp timestamp, key binary, "
    "value binary, tombstone boolean, op string, lsn bigint, tx_id bigint, "
    "commit_time timestamp, snapshot string, key_json string, before string, after string, "
    "ingested_at timestamp"
)
# Which change a current row came from.
CURRENT_SOURCE = "lsn bigint, kafka_offset bigint, commit_time timestamp"
# A version's life on the business clock, and the changes that opened and ended it.
VERSION_LIFE = (
    "valid_from timestamp, valid_to timestamp, is_current boolean, deleted boolean, "
    "lsn bigint, ended_lsn bigint"
)
CDC_PROGRESS = (
    "app_id string, batch_id bigint, records bigint, quarantined bigint, tombstones bigint, "
    "applied map<string,bigint>, offsets map<string,bigint>, newest_commit_time timestamp, "
    "processed_at timestamp, duration_seconds double"
)
CDC_PROGRESS_CHECKPOINT_INTERVAL = 179
# The table-table view the changelog stream maintains: each current user with the count and
# spend of their current orders (lakehouse.transforms.user_orders).
USER_ORDERS = (
    "user_id string, segment string, country string, orders bigint, spend decimal(38,2), "
    "last_order_at timestamp, users_lsn bigint, orders_lsn bigint"
)
USER_ORDERS_CHECKPOINT_INTERVAL = 181
# The changelog stream commits every table each micro-batch (primes, as the speed layer's):
# the quarantine's, then each captured table's changes, current and history in turn.
CDC_CHECKPOINT_INTERVALS = (127, 131, 137, 139, 149, 151, 157, 163, 167, 173)


def captured_tables(captured: CapturedTable, intervals: tuple[int, int, int]) -> list[Table]:
    """A captured table's changelog, its current rows and its type-2 history."""
    changes, current, history = intervals
    return [
        Table(
            f"bronze.{captured.name}_changes",
            CDC,
            f"Every change of shop.{captured.name} as received: op, LSN, commit time, before, "
            "after, key and log position, tombstones too. Compaction never reaches it.",
            schema=CHANGES,
            checkpoint_interval=changes,
            stats_columns=("kafka_timestamp", "ingested_at", "offset", "lsn"),
        ),
        Table(
            f"silver.{captured.name}_current",
            CDC,
            f"shop.{captured.name} as of the last change applied: one row per key, deletes "
            "applied, with the change it came from",
            schema=f"{captured.ddl}, {CURRENT_SOURCE}",
            checkpoint_interval=current,
        ),
        Table(
            f"silver.{captured.name}_history",
            CDC,
            f"shop.{captured.name}'s versions (type 2): one row per version, valid from its "
            f"{captured.clock} until the next version's or its delete's commit time",
            schema=f"{captured.ddl}, {VERSION_LIFE}",
            checkpoint_interval=history,
        ),
    ]


def _cdc_tables() -> list[Table]:
    quarantine, *per_table = CDC_CHECKPOINT_INTERVALS
    assert len(per_table) == 3 * len(CAPTURED), "three intervals per captured table"
    tables = [
        Table(
            "bronze.cdc_quarantine",
            CDC,
            "Changelog records that cannot be parsed as changes: the raw record and its reasons",
            schema=QUARANTINE,
            checkpoint_interval=quarantine,
        )
    ]
    for i, captured in enumerate(CAPTURED.values()):
        changes, current, history = per_table[3 * i : 3 * i + 3]
        tables += captured_tables(captured, (changes, current, history))
    tables.append(
        Table(
            "ops.cdc_progress",
            CDC,
            "One row per changelog micro-batch: records, quarantined, tombstones, row changes "
            "applied per table, the next offset of each topic partition",
            schema=CDC_PROGRESS,
            checkpoint_interval=CDC_PROGRESS_CHECKPOINT_INTERVAL,
        )
    )
    tables.append(
        Table(
            "silver.user_orders",
            CDC,
            "Each current user with their current orders' count and spend: the batch join of "
            "silver.users_current and silver.orders_current, kept up to date from both changelogs",
            schema=USER_ORDERS,
            checkpoint_interval=USER_ORDERS_CHECKPOINT_INTERVAL,
        )
    )
    return tables


ENRICHED = (
    "event_id string, event_type string, user_id string, product_id string, "
    "amount decimal(18,2), event_time timestamp, event_date date, "
    "category string, list_price decimal(10,2), product_match string, "
    "product_version_lsn bigint, segment string, country string, user_match string, "
    "user_version_lsn bigint, enriched_batch bigint, corrected boolean"
)
REVENUE_VIEW = (
    "window_start timestamp, window_end timestamp, segment string, category string, "
    "purchases bigint, revenue decimal(38,2)"
)
REVENUE = f"{REVENUE_VIEW}, batch_id bigint"  # the stream's partial rows, by micro-batch


def _enrichment_tables() -> list[Table]:
    return [
        Table(
            "silver.events_enriched",
            ENRICH,
            "Accepted events with their product's and user's columns as of their event time, "
            "one row per enrichment: a later row of an event (corrected) replaces the earlier",
            schema=ENRICHED,
            partition_by=("event_date",),
            checkpoint_interval=181,
            stats_columns=("event_time", "user_id", "product_id", "enriched_batch"),
        ),
        Table(
            "speed.revenue_by_segment",
            ENRICH,
            "Purchases and revenue per hour, user segment and product category: partial rows "
            "per micro-batch, corrections included, summed by readers",
            schema=REVENUE,
            checkpoint_interval=191,
            layout_columns=WINDOW_HOUR,
        ),
        Table(
            "ops.enrichment_pins",
            ENRICH,
            "The history tables' versions each enrichment micro-batch joins with, chosen "
            "before it writes, so that a retried batch joins with the same",
            schema="app_id string, batch_id bigint, versions map<string,bigint>, "
            "pinned_at timestamp",
            checkpoint_interval=193,
        ),
        Table(
            "ops.enrichment_progress",
            ENRICH,
            "One row per enrichment micro-batch: events enriched, events corrected, the "
            "history versions joined",
            schema="app_id string, batch_id bigint, events bigint, corrected bigint, "
            "versions map<string,bigint>, processed_at timestamp, duration_seconds double",
            checkpoint_interval=197,
        ),
        Table(
            "ops.enrichment_checks",
            ENRICH,
            "One row per judged run of a replay version's enrichment (jobs.enrich_replay): "
            "the last batch judged, the version of its events table every event of which it "
            "had read, the verdict. Kappa serving reads the version's revenue up to its last "
            "passed check",
            schema="batch_id bigint, events_version bigint, equal boolean, "
            "events_compared bigint, windows_compared bigint, checked_at timestamp",
            checkpoint_interval=199,
        ),
    ]


# An order lifecycle event and a payment as accepted (lakehouse.transforms.commerce), with
# their Kafka coordinates: the fold into the order state goes by them.
ORDER_EVENT = (
    "event_id string, order_id string, user_id string, type string, amount decimal(18,2), "
    "event_time timestamp, sent_at timestamp, kafka_partition int, kafka_offset bigint, "
    "kafka_timestamp timestamp, ingested_at timestamp"
)
PAYMENT = (
    "payment_id string, order_id string, amount decimal(18,2), paid_at timestamp, "
    "sent_at timestamp, kafka_partition int, kafka_offset bigint, kafka_timestamp timestamp, "
    "ingested_at timestamp"
)
ORDER_STATE = (
    "order_id string, user_id string, status string, amount decimal(18,2), "
    "placed_at timestamp, updated_at timestamp, events_applied bigint, rejected bigint, "
    "last_event_id string, kafka_partition int, kafka_offset bigint"
)
REJECTED_TRANSITIONS = (
    "event_id string, order_id string, type string, from_status string, reason string, "
    "event_time timestamp, kafka_partition int, kafka_offset bigint, rejected_at timestamp"
)
COMMERCE_PROGRESS = (
    "app_id string, batch_id bigint, records bigint, quarantined bigint, duplicates bigint, "
    "order_events bigint, payments bigint, applied bigint, rejected bigint, "
    "offsets map<string,bigint>, processed_at timestamp, duration_seconds double"
)


def _commerce_tables() -> list[Table]:
    return [
        Table(
            "bronze.commerce_raw",
            COMMERCE,
            "Every record of the payments and order-events topics as received: the replays' "
            "and the batch fold's source",
            schema=RAW,
            checkpoint_interval=199,
            stats_columns=("topic", "kafka_timestamp", "ingested_at", "partition", "offset"),
        ),
        Table(
            "bronze.commerce_quarantine",
            COMMERCE,
            "Payments and order events that break their contract: the raw record and its reasons",
            schema=QUARANTINE,
            checkpoint_interval=211,
        ),
        Table(
            "silver.order_events",
            COMMERCE,
            "Accepted order lifecycle events, typed, one row per event_id (first delivery wins)",
            schema=ORDER_EVENT,
            checkpoint_interval=223,
            stats_columns=("event_time", "order_id", "kafka_timestamp"),
        ),
        Table(
            "silver.payments",
            COMMERCE,
            "Accepted payments, typed, one row per payment_id (first delivery wins)",
            schema=PAYMENT,
            checkpoint_interval=227,
            stats_columns=("paid_at", "order_id", "kafka_timestamp"),
        ),
        Table(
            "silver.order_state",
            COMMERCE,
            "Each order's state folded from its events in log order: status, amount, the last "
            "event applied; transitions the lifecycle forbids are not applied",
            schema=ORDER_STATE,
            checkpoint_interval=229,
        ),
        Table(
            "silver.order_transitions_rejected",
            COMMERCE,
            "Order events whose transition the lifecycle forbids (shipped before paid, ...): "
            "recorded with the status they met, never applied",
            schema=REJECTED_TRANSITIONS,
            checkpoint_interval=233,
        ),
        Table(
            "ops.commerce_progress",
            COMMERCE,
            "One row per commerce micro-batch: records, quarantined, duplicates, events "
            "applied and rejected, the next offset of each topic partition",
            schema=COMMERCE_PROGRESS,
            checkpoint_interval=239,
        ),
    ]


ATTRIBUTION = (
    "purchase_event_id string, click_event_id string, user_id string, product_id string, "
    "amount decimal(18,2), purchase_time timestamp, click_time timestamp, "
    "seconds_before bigint, batch_id bigint"
)
ORDER_PAYMENTS = (
    "order_id string, user_id string, order_amount decimal(18,2), placed_at timestamp, "
    "payment_id string, payment_amount decimal(18,2), paid_at timestamp, paid boolean, "
    "batch_id bigint"
)
JOIN_PROGRESS = (
    "query string, app_id string, batch_id bigint, processed_at timestamp, "
    "watermark timestamp, input_rows bigint, output_rows bigint, state_rows bigint, "
    "state_bytes bigint, dropped_by_watermark bigint, sources string"
)


def _join_tables() -> list[Table]:
    return [
        Table(
            "silver.purchase_attribution",
            JOINS,
            "Each purchase with the same user's clicks on its product in the 30 minutes "
            "before it (inner stream-stream join on event time)",
            schema=ATTRIBUTION,
            checkpoint_interval=241,
            stats_columns=("purchase_time", "user_id", "product_id"),
        ),
        Table(
            "silver.order_payments",
            JOINS,
            "Each placed order with its payments within one hour (left outer stream-stream "
            "join): an order unpaid by then is emitted once, paid = false",
            schema=ORDER_PAYMENTS,
            checkpoint_interval=251,
            stats_columns=("placed_at", "order_id"),
        ),
        Table(
            "ops.join_progress",
            JOINS,
            "One row per join query and micro-batch: watermark, rows in and out, the join "
            "state's rows and bytes, rows dropped as late, source offsets",
            schema=JOIN_PROGRESS,
            checkpoint_interval=257,
        ),
    ]


TABLES: dict[str, Table] = {
    t.name: t
    for t in (
        Table(
            "bronze.events_raw",
            SPEED,
            "Every Kafka record as received: key, value and Kafka coordinates. The master dataset.",
            schema=RAW,
            checkpoint_interval=97,
            # The batch layer reads bronze by ingest time.
            stats_columns=("kafka_timestamp", "ingested_at", "partition", "offset"),
        ),
        Table(
            "bronze.quarantine",
            SPEED,
            "Records that break the event contract: the raw record and a reason per broken rule",
            schema=QUARANTINE,
            checkpoint_interval=89,
        ),
        Table(
            "silver.events",
            SPEED,
            "Accepted events, typed and deduplicated by event_id",
            schema=f"{EVENT}, arrived_late boolean",
            partition_by=("event_date",),
            checkpoint_interval=101,
            # The speed layer's dedup looks up silver by event time.
            stats_columns=("event_time", "kafka_timestamp", "ingested_at"),
        ),
        Table(
            "speed.event_counts_1m",
            SPEED,
            "1-minute tumbling windows per event_type: events and amount sum (on-time events)",
            schema=EVENT_COUNTS,
            checkpoint_interval=103,
            layout_columns=WINDOW_HOUR,
            partials_of="event_counts_1m",
        ),
        Table(
            "speed.active_users_10m",
            SPEED,
            "10-minute windows sliding every minute, per page: distinct users and events",
            schema=ACTIVE_USERS,
            checkpoint_interval=107,
            layout_columns=WINDOW_HOUR,
            partials_of="active_users_10m",
        ),
        Table(
            "speed.user_sessions",
            SPEED,
            "Per-user sessions closed by 30 minutes of inactivity: events, duration, revenue",
            schema=SESSIONS,
            checkpoint_interval=109,
            layout_columns=SESSION_HOUR,
            partials_of="user_sessions",
        ),
        Table(
            "speed.late_events",
            SPEED,
            "Accepted events that arrived after the watermark had closed their windows",
            schema=f"{EVENT}, watermark timestamp",
            checkpoint_interval=113,
        ),
        Table(
            "ops.speed_progress",
            SPEED,
            "One row per micro-batch: counts, watermark, duration, Kafka lag, freshness",
            schema=PROGRESS,
            checkpoint_interval=83,
        ),
        Table(
            "batch.first_deliveries",
            BATCH,
            "Each event_id's first accepted delivery in bronze: the batch layer's dedup",
            schema=FIRST_DELIVERIES,
        ),
        Table(
            "batch.redeliveries",
            BATCH,
            "Every accepted delivery in bronze that is not its event_id's first: left out",
            schema=REDELIVERIES,
        ),
        Table(
            "batch.event_counts_1m",
            BATCH,
            "1-minute tumbling windows per event_type, recomputed complete from bronze",
            schema=EVENT_COUNTS,
        ),
        Table(
            "batch.active_users_10m",
            BATCH,
            "10-minute sliding windows per page, recomputed complete from bronze",
            schema=ACTIVE_USERS,
        ),
        Table(
            "batch.user_sessions",
            BATCH,
            "Per-user sessions, recomputed complete from bronze",
            schema=SESSIONS,
        ),
        Table(
            "ops.replay_versions",
            REPLAY,
            "Replay versions' life: planned (offset ranges, gaps), caught up (records, rate)",
            schema=VERSION_EVENTS,
        ),
        Table(
            "ops.serving_pointer",
            VERSIONS,
            "Which stream output the serving layer reads: one row per promotion or rollback",
            schema=POINTER,
        ),
        Table(
            "batch.revenue_by_segment",
            BATCH,
            "Purchases and revenue per hour, user segment and product category, recomputed "
            "complete from bronze and the dimensions' history tables (the versions joined "
            "on each row)",
            schema=f"{REVENUE_VIEW}, users_version bigint, products_version bigint",
        ),
        Table(
            "ops.batch_runs",
            BATCH,
            "One row per view per batch run: interval, bronze version read, final-until mark",
            schema=BATCH_RUNS,
        ),
        Table(
            "dq.reconciliation_runs",
            RECONCILE,
            "One row per reconciliation run and view: sides, counts per status, verdict, report",
            schema=RECONCILIATION_RUNS,
        ),
        Table(
            "dq.reconciliation_windows",
            RECONCILE,
            "Per run and view key: both sides' measures, difference, status and explanation",
            schema=RECONCILIATION_WINDOWS,
        ),
        Table(
            "dq.quality_runs",
            QUALITY,
            "One row per quality run and table: version validated, verdict, broken checks, docs",
            schema=QUALITY_RUNS,
        ),
        Table(
            "dq.quality_quarantine",
            QUALITY,
            "Rows a quality run's QUARANTINE checks refused: table, version, row as JSON, reasons",
            schema=QUALITY_QUARANTINE,
        ),
        *_cdc_tables(),
        *_enrichment_tables(),
        *_commerce_tables(),
        *_join_tables(),
    )
}


def table(name: str) -> Table:
    try:
        return TABLES[name]
    except KeyError:
        raise UnknownTableError(name) from None
