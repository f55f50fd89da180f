"""Change data capture: commit -> silver.<table>_current, against Connect's own throughput.

    .venv/bin/python -m bench.cdc [--changes 20000] [--rate 500] [--seconds 120]
                                  [--per-transaction 1]

Needs Kafka, PostgreSQL and Kafka Connect (`make up`, or the test services:
`python -m infra.test_env python -m bench.cdc`). The bench registers a connector of its own
(connector, replication slot, publication and topic prefix named by the run), so it never
meets the platform's capture, and writes its rows under a key prefix of its own; the
connector, slot, publication, topics and rows are removed at the end. Its lakehouse stays in
/tmp/tributary-bench/cdc-<run>/ for a closer look.

Steps, all in one process and one SparkSession:
1. baseline, Connect's own throughput: the change generator applies --changes changes (after
   its seed rows) as fast as it can, one transaction each, while the bench polls the topics'
   end offsets; changes/s from the first commit until the topics hold every change's records;
2. the changelog stream's catch-up (availableNow) over what step 1 published: changes/s from
   the query's start until silver.<table>_current holds them, and its ratio to step 1. The
   two steps run one after the other, so the sum of their times is also given as a
   commit-to-current time for the whole run;
3. latency: the changelog stream running (processingTime trigger, speed.trigger_interval
   1 s) while the generator applies --rate changes/s for --seconds; for each change, its
   commit (the ledger's committed_at) to the end of the micro-batch that read its record
   (ops.cdc_progress processed_at, written after the batch's current and history MERGEs):
   p50/p99/max, the two halves of the run compared (is the lag growing), and the rate the
   generator actually reached.
Results are printed and written to bench/results/cdc-<timestamp>.json.
"""

from __future__ import annotations

import argparse
import os
import threading
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from bench.report import save_results
from lakehouse.cdc.changelog import PROGRESS, changes_table, current_table
from lakehouse.cdc.connector import (
    delete_connector,
    drop_replication_slot,
    register_connector,
    wait_until_running,
)
from lakehouse.cdc.shop import CAPTURED
from lakehouse.cdc.stream import start_changelog_query
from lakehouse.core.config import Settings, load_settings
from lakehouse.core.delta_io import read_table
from lakehouse.core.kafka_io import connect, delete_topics
from lakehouse.core.spark import get_spark
from lakehouse.generator.ledger import read_ledger
from lakehouse.generator.shop_apply import apply_changes
from lakehouse.generator.shop_apply import connect as connect_shop
from lakehouse.generator.shop_changes import DELETE, KEY_UPDATE, TABLE_KEYS, ChangeConfig

if TYPE_CHECKING:
    import pandas as pd
    from kafka import KafkaConsumer
    from pyspark.sql import SparkSession

BENCH_ROOT = Path("/tmp/tributary-bench")
# The records Debezium writes per change: a delete is followed by its tombstone, and a
# primary-key update is a delete, its tombstone and a create.
RECORDS_PER_OP = {DELETE: 2, KEY_UPDATE: 3}
POLL_SECONDS = 0.1
PUBLISH_TIMEOUT_SECONDS = 300.0
DRAIN_TIMEOUT_SECONDS = 180.0
# The latency's second half counts as growing when its p50 is over the first half's by more
# than 10% plus one trigger interval (a change may wait up to one interval for its batch).
LAG_GROWTH_TOLERANCE = 1.1
TRIGGER_INTERVAL_SECONDS = 1


def bench_settings(run: str) -> Settings:
    """Settings of this run's own lakehouse and capture. The test services' Spark overrides
    (tiny-data settings: no code generation, a client compiler) are dropped, so the stream
    runs as it would in production; their ports stay."""
    own = f"bench-cdc-{run.lower()}"
    identifier = own.replace("-", "_")
    root = BENCH_ROOT / f"cdc-{run}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRIBUTARY__SPARK__")}
    env.pop("TRIBUTARY_PROFILE", None)
    env |= {
        "TRIBUTARY__STORAGE__ROOT": str(root / "lakehouse"),
        "TRIBUTARY__STORAGE__CHECKPOINTS": str(root / "checkpoints"),
        "TRIBUTARY__SPEED__TRIGGER_INTERVAL_SECONDS": str(TRIGGER_INTERVAL_SECONDS),
        "TRIBUTARY__CDC__TOPIC_PREFIX": own,
        "TRIBUTARY__CDC__CONNECTOR_NAME": own,
        "TRIBUTARY__CDC__SLOT_NAME": identifier,
        "TRIBUTARY__CDC__PUBLICATION_NAME": identifier,
    }
    return load_settings("local", env)


def key_prefix(run: str) -> str:
    """The generator's key prefix for this run (at most 20 characters)."""
    return f"b{run[-6:]}-"


def topics(settings: Settings) -> list[str]:
    return [settings.cdc.topic(name) for name in settings.cdc.tables]


class TopicWatch:
    """The records the capture's topics hold, read from their end offsets by one consumer."""

    def __init__(self, settings: Settings) -> None:
        from kafka import KafkaConsumer

        self.topics = topics(settings)
        self.consumer: KafkaConsumer = connect(settings, KafkaConsumer, enable_auto_commit=False)

    def records(self) -> int:
        from kafka import TopicPartition

        known = self.consumer.topics()  # refreshes the metadata: Debezium creates topics lazily
        parts = [
            TopicPartition(topic, p)
            for topic in self.topics
            if topic in known
            for p in sorted(self.consumer.partitions_for_topic(topic) or ())
        ]
        return sum(self.consumer.end_offsets(parts).values()) if parts else 0

    def close(self) -> None:
        self.consumer.close()


def expected_records(entries: Sequence[Mapping[str, Any]]) -> int:
    return sum(RECORDS_PER_OP.get(entry["op"], 1) for entry in entries)


def committed_at(entry: Mapping[str, Any]) -> datetime:
    return datetime.fromisoformat(entry["committed_at"].replace("Z", "+00:00"))


class Generator(threading.Thread):
    """apply_changes in a thread of its own; its summary once joined."""

    def __init__(
        self,
        settings: Settings,
        cfg: ChangeConfig,
        ledger: Path,
        rate: float | None,
        per_transaction: int = 1,
    ):
        super().__init__(daemon=True)
        self.args = (settings.cdc, cfg, ledger, rate, per_transaction)
        self.summary: dict[str, Any] = {}
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.summary = apply_changes(*self.args, progress_every=30.0)
        except BaseException as err:  # re-raised by the bench's thread (finished)
            self.error = err

    def finished(self) -> dict[str, Any]:
        self.join()
        if self.error is not None:
            raise self.error
        return self.summary


def change_config(run: str, count: int, seed: int, rate: float | None) -> ChangeConfig:
    step = timedelta(seconds=1 / rate) if rate else timedelta(milliseconds=10)
    return ChangeConfig(
        count=count, seed=seed, start=datetime.now(UTC), step=step, key_prefix=key_prefix(run)
    )


def connect_throughput(settings: Settings, run: str, changes: int) -> dict[str, Any]:
    """Step 1: apply `changes` as fast as the generator can; changes/s from the first commit
    until the topics hold every change's records."""
    ledger = BENCH_ROOT / f"cdc-{run}" / "ledger-baseline.jsonl"
    watch = TopicWatch(settings)
    try:
        before = watch.records()
        generator = Generator(settings, change_config(run, changes, 31, None), ledger, None)
        generator.start()
        samples = []  # (when, records): the first one to hold every change decides
        while generator.is_alive():
            samples.append((datetime.now(UTC), watch.records() - before))
            time.sleep(POLL_SECONDS)
        summary = generator.finished()
        entries = read_ledger(ledger)
        wanted = expected_records(entries)
        deadline = time.monotonic() + PUBLISH_TIMEOUT_SECONDS
        while samples[-1][1] < wanted and time.monotonic() < deadline:
            time.sleep(POLL_SECONDS)
            samples.append((datetime.now(UTC), watch.records() - before))
    finally:
        watch.close()
    reached = next((when for when, held in samples if held >= wanted), None)
    if reached is None:
        raise SystemExit(
            f"the topics hold {samples[-1][1]} of {wanted} records after "
            f"{PUBLISH_TIMEOUT_SECONDS:.0f}s: see the Connect log"
        )
    first, last = committed_at(entries[0]), committed_at(entries[-1])
    seconds = (reached - first).total_seconds()
    return {
        "changes": len(entries),
        "records": wanted,
        "generator_changes_per_second": summary["changes_per_second"],
        "commits_seconds": round((last - first).total_seconds(), 2),
        "first_commit_to_topic_seconds": round(seconds, 2),
        "last_commit_to_topic_seconds": round((reached - last).total_seconds(), 2),
        "changes_per_second": round(len(entries) / seconds),
        "ledger": str(ledger),
    }


def read_progress(spark: SparkSession, settings: Settings) -> pd.DataFrame:
    rows = cast("pd.DataFrame", read_table(spark, PROGRESS, settings).toPandas())
    return rows.sort_values("batch_id")


def live_keys(settings: Settings, run: str) -> int:
    """The generator's rows the shop tables hold now: what current must hold."""
    with connect_shop(settings.cdc) as conn:
        counts = [
            conn.execute(own_rows("SELECT count(*)", settings, table), (key_prefix(run),))
            for table in TABLE_KEYS
        ]
        return sum(int(row[0]) for cursor in counts if (row := cursor.fetchone()))


def own_rows(verb: str, settings: Settings, table: str) -> Any:
    """`verb` FROM the shop table, over the rows under the run's key prefix (a parameter)."""
    from psycopg import sql

    return sql.SQL(verb + " FROM {} WHERE starts_with({}, %s)").format(
        sql.Identifier(settings.cdc.schema_name, table), sql.Identifier(TABLE_KEYS[table])
    )


def current_rows(spark: SparkSession, settings: Settings, run: str) -> int:
    """The current rows under the run's key prefix (the snapshot also brings any other rows
    the shop holds), to set beside live_keys."""
    from pyspark.sql import functions as F

    return sum(
        read_table(spark, current_table(CAPTURED[name]), settings)
        .where(F.col(TABLE_KEYS[name]).startswith(key_prefix(run)))
        .count()
        for name in settings.cdc.tables
    )


def stream_catch_up(
    spark: SparkSession, settings: Settings, run: str, baseline: Mapping[str, Any]
) -> dict[str, Any]:
    """Step 2: the changelog stream (availableNow) over what step 1 published."""
    began = datetime.now(UTC)
    start_changelog_query(spark, settings, available_now=True).awaitTermination()
    ended = datetime.now(UTC)
    seconds = (ended - began).total_seconds()
    progress = read_progress(spark, settings)
    changes = baseline["changes"]
    entries = read_ledger(baseline["ledger"])
    whole_run = (ended - committed_at(entries[0])).total_seconds()
    return {
        "changes": changes,
        "records_read": int(progress["records"].sum()),
        "batches": len(progress),
        "seconds": round(seconds, 2),
        "changes_per_second": round(changes / seconds),
        "ratio_to_connect": round(changes / seconds / baseline["changes_per_second"], 3),
        "first_commit_to_current_seconds_sequential": round(whole_run, 2),
        "changes_per_second_sequential": round(changes / whole_run),
        "current_rows": current_rows(spark, settings, run),
        "live_rows_in_postgres": live_keys(settings, run),
        "last_batch_id": int(progress["batch_id"].max()),
    }


def stream_drained(spark: SparkSession, settings: Settings) -> bool:
    """Whether the running stream's batches have read every record the topics hold."""
    watch = TopicWatch(settings)
    try:
        from kafka import TopicPartition

        ends = {
            f"{tp.topic}:{tp.partition}": offset
            for tp, offset in watch.consumer.end_offsets(
                [TopicPartition(t, 0) for t in watch.topics]
            ).items()
        }
    finally:
        watch.close()
    read: dict[str, int] = {}
    for offsets in read_progress(spark, settings)["offsets"]:
        for position, offset in dict(offsets).items():
            read[position] = max(read.get(position, 0), int(offset))
    return all(read.get(position, 0) >= end for position, end in ends.items())


def covering_batches(changes: pd.DataFrame, progress: pd.DataFrame) -> pd.DataFrame:
    """Each change's record with the end of the first batch whose offsets go past it (a
    batch's offsets are the next offset of each partition it read)."""
    import pandas as pd

    ends = [
        {"position": position, "next_offset": int(offset), "processed_at": row.processed_at}
        for row in progress.itertuples()
        for position, offset in dict(row.offsets).items()
    ]
    batches = pd.DataFrame(ends).sort_values("next_offset")
    changes = changes.assign(
        position=changes["topic"] + ":" + changes["partition"].astype(str),
        past=changes["offset"] + 1,
    ).sort_values("past")
    return pd.merge_asof(
        changes,
        batches,
        left_on="past",
        right_on="next_offset",
        by="position",
        direction="forward",
    )


def change_latencies(
    spark: SparkSession, settings: Settings, entries: Sequence[Mapping[str, Any]], after: int
) -> pd.DataFrame:
    """Per change of the ledger (one transaction each, so its txid names it): its commit and
    the end of the batch that read its last record, and the seconds between."""
    import pandas as pd
    from pyspark.sql import functions as F

    txids = {int(e["txid"]) for e in entries}
    records = None
    for name in settings.cdc.tables:
        rows = read_table(spark, changes_table(CAPTURED[name]), settings)
        rows = rows.where(F.col("tx_id").between(min(txids), max(txids)))
        rows = rows.select("topic", "partition", "offset", "tx_id")
        records = rows if records is None else records.unionByName(rows)
    assert records is not None
    mine = cast("pd.DataFrame", records.toPandas())
    mine = mine[mine["tx_id"].isin(txids)]
    progress = read_progress(spark, settings)
    found = covering_batches(mine, progress[progress["batch_id"] > after])
    ended = found.groupby("tx_id")["processed_at"].max().dt.tz_localize(UTC)
    ledger = pd.DataFrame(
        {"tx_id": [int(e["txid"]) for e in entries], "committed_at": map(committed_at, entries)}
    )
    ledger["committed_at"] = pd.to_datetime(ledger["committed_at"], utc=True)
    joined = ledger.join(ended.rename("current_at"), on="tx_id")
    joined["seconds"] = (joined["current_at"] - joined["committed_at"]).dt.total_seconds()
    return joined.sort_values("committed_at")


def latency_under_load(
    spark: SparkSession,
    settings: Settings,
    run: str,
    rate: float,
    seconds: float,
    after: int,
    per_transaction: int = 1,
) -> dict[str, Any]:
    """Step 3: the stream running while the generator applies `rate` changes/s."""
    ledger = BENCH_ROOT / f"cdc-{run}" / "ledger-live.jsonl"
    query = start_changelog_query(spark, settings, available_now=False)
    try:
        cfg = change_config(run, int(rate * seconds), 37, rate)
        generator = Generator(settings, cfg, ledger, rate, per_transaction)
        generator.start()
        applied = generator.finished()
        deadline = time.monotonic() + DRAIN_TIMEOUT_SECONDS
        while not stream_drained(spark, settings) and time.monotonic() < deadline:
            time.sleep(1)
    finally:
        query.stop()
    entries = read_ledger(ledger)
    latencies = change_latencies(spark, settings, entries, after)
    found = latencies["seconds"].dropna()
    half = len(latencies) // 2
    first, second = latencies["seconds"][:half], latencies["seconds"][half:]
    progress = read_progress(spark, settings)
    live = progress[progress["batch_id"] > after]
    result = {
        "rate_asked": rate,
        "seconds_asked": seconds,
        "changes": len(entries),
        "rate_reached": applied["changes_per_second"],
        "changes_without_a_batch": int(latencies["seconds"].isna().sum()),
        "batches": len(live),
        "median_batch_seconds": round(float(live["duration_seconds"].median()), 2),
        "latency_p50_seconds": round(float(found.quantile(0.5)), 2),
        "latency_p99_seconds": round(float(found.quantile(0.99)), 2),
        "latency_max_seconds": round(float(found.max()), 2),
        "first_half_p50_seconds": round(float(first.quantile(0.5)), 2),
        "second_half_p50_seconds": round(float(second.quantile(0.5)), 2),
        "first_half_p99_seconds": round(float(first.quantile(0.99)), 2),
        "second_half_p99_seconds": round(float(second.quantile(0.99)), 2),
        "current_rows": current_rows(spark, settings, run),
        "live_rows_in_postgres": live_keys(settings, run),
    }
    result["lag_growing"] = bool(
        result["second_half_p50_seconds"]
        > LAG_GROWTH_TOLERANCE * result["first_half_p50_seconds"] + TRIGGER_INTERVAL_SECONDS
    )
    return result


def remove_capture(settings: Settings, run: str) -> None:
    """The run's connector, slot, publication, topics and rows."""
    delete_connector(settings.cdc)
    drop_replication_slot(settings.cdc)
    delete_topics(settings, f"{settings.cdc.topic_prefix}.")
    with connect_shop(settings.cdc) as conn:
        for table in TABLE_KEYS:
            conn.execute(own_rows("DELETE", settings, table), (key_prefix(run),))
        conn.commit()


def main() -> None:
    parser = argparse.ArgumentParser(
        allow_abbrev=False,
        prog="python -m bench.cdc",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--changes", type=int, default=20_000)
    parser.add_argument("--rate", type=float, default=500.0)
    parser.add_argument("--seconds", type=float, default=120.0)
    # One generator commits one transaction at a time: more changes per transaction reach a
    # higher --rate (step 3 only).
    parser.add_argument("--per-transaction", type=int, default=1)
    args = parser.parse_args()

    run = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    settings = bench_settings(run)
    results: dict[str, Any] = {"run": run, "machine": "2 cores, 24 GiB, shared"}
    spark = get_spark("bench-cdc", settings)
    try:
        print(f"==> connector {settings.cdc.connector_name}: registering", flush=True)
        register_connector(settings.cdc)
        wait_until_running(settings.cdc)
        print(f"==> baseline: {args.changes} changes as fast as the generator goes", flush=True)
        results["connect"] = connect_throughput(settings, run, args.changes)
        print(f"    {results['connect']}", flush=True)
        print("==> changelog stream catch-up (availableNow) over those changes", flush=True)
        results["catch_up"] = stream_catch_up(spark, settings, run, results["connect"])
        print(f"    {results['catch_up']}", flush=True)
        if args.seconds > 0:
            print(f"==> latency: {args.rate:g} changes/s for {args.seconds:g}s", flush=True)
            after = results["catch_up"]["last_batch_id"]
            results["latency"] = latency_under_load(
                spark, settings, run, args.rate, args.seconds, after, args.per_transaction
            )
            print(f"    {results['latency']}", flush=True)
    finally:
        remove_capture(settings, run)
    save_results("cdc", run, results)


if __name__ == "__main__":
    main()
