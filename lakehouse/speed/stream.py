"""The speed layer's streaming query: start it, run it until asked to stop, stop it gracefully.

The speed layer (`python -m jobs.speed_layer`) and replays (lakehouse.replay.run) run the same
query into their own tables (SpeedOutputs); each micro-batch goes to
lakehouse.speed.micro_batch. A stop (Ctrl-C, SIGTERM, or a stop file) lets the running batch
commit first; whatever way the query stops, a restart continues from its checkpoint.
"""

from __future__ import annotations

import contextlib
import signal
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from lakehouse.core.config import Settings
from lakehouse.core.delta_io import read_kafka_stream, table_exists
from lakehouse.core.kafka_io import ensure_topic
from lakehouse.core.kafka_offsets import end_offsets
from lakehouse.core.locks import WriterBusyError, exclusive_writer
from lakehouse.core.spark import get_spark
from lakehouse.core.storage import ensure_bucket
from lakehouse.core.stream_outputs import check_own_outputs, replay_again
from lakehouse.ops.migrate import require_bytes
from lakehouse.speed.micro_batch import KeptVersions, MicroBatchProcessor
from lakehouse.speed.outputs import SpeedOutputs

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import DataStreamWriter, StreamingQuery

QUERY_NAME = "speed_layer"


def start_query(
    spark: SparkSession,
    settings: Settings,
    outputs: SpeedOutputs,
    available_now: bool,
    topic: str | None = None,
    starting_offsets: str = "earliest",
    max_offsets_per_trigger: int | None = None,
    kept_versions: KeptVersions | None = None,
) -> StreamingQuery:
    """The speed layer's query into `outputs` (the live tables, or a replay's). The starting
    offsets only count on a first start: afterwards the checkpoint knows where it is.
    OtherCheckpointError when the outputs hold another checkpoint's batches: a query there
    would take every event it reads for new, its dedup pinned to no silver version."""
    require_bytes(spark, settings, (outputs.raw, outputs.quarantine))
    checkpoint = outputs.checkpoint(settings)
    if outputs.raw is None:
        version = outputs.name.removeprefix("replay_")
        fix = replay_again(version)
    else:
        fix = (
            "put that checkpoint back (the live tables are a copy of the log no other checkpoint "
            "can continue); a kappa replay (`python -m jobs.replay`) rebuilds the views from "
            "the log into a version of their own"
        )
    check_own_outputs(
        spark,
        settings,
        output=outputs.silver,
        progress=outputs.progress,
        checkpoint=checkpoint,
        app_prefix=f"{outputs.name}:",
        fix=fix,
    )
    processor = MicroBatchProcessor(
        settings,
        outputs,
        checkpoint,
        end_offsets=lambda: end_offsets(settings, topic),
        kept_versions=kept_versions,
    )
    stream = read_kafka_stream(
        spark,
        settings,
        topic=topic,
        starting_offsets=starting_offsets,
        max_offsets_per_trigger=max_offsets_per_trigger or settings.speed.max_offsets_per_trigger,
    )
    writer = (
        stream.writeStream.queryName(outputs.name)
        .foreachBatch(processor)
        .option("checkpointLocation", checkpoint)
    )
    return started(writer, settings, available_now)


def started(writer: DataStreamWriter, settings: Settings, available_now: bool) -> StreamingQuery:
    """A stream's query started: until it has read what its source holds now
    (`available_now`), or a batch every speed.trigger_interval_seconds until stopped."""
    if available_now:
        return writer.trigger(availableNow=True).start()
    return writer.trigger(
        processingTime=f"{settings.speed.trigger_interval_seconds} seconds"
    ).start()


class QueryFailedError(Exception):
    """The streaming query stopped on an error; it restarts from its checkpoint."""


class StopRequest:
    """Set by SIGTERM/SIGINT or by the stop file; checked between batches."""

    def __init__(self, stop_file: Path) -> None:
        self.stop_file = stop_file
        self.signalled = False
        self._listen()

    def _listen(self) -> None:
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)

    def take_over(self, spark: SparkSession) -> None:
        """Make the signals stop gracefully again once `spark` has started.

        Starting the SparkContext replaces SIGINT's handler with pyspark's, which cancels every
        job and raises KeyboardInterrupt inside whatever py4j call is running: Ctrl-C ended in
        a 70-line crash instead of finishing the batch. And a SIGTERM to the whole process
        group (`timeout make speed`) would end the JVM mid-batch, so the JVM ignores SIGTERM as
        pyspark already makes it ignore SIGINT: the driver decides. It cannot outlive the
        driver: it exits once its stdin, a pipe from the driver, closes (PythonGatewayServer).
        """
        self._listen()
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        jvm.sun.misc.Signal.handle(jvm.sun.misc.Signal("TERM"), jvm.sun.misc.SignalHandler.SIG_IGN)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.signalled = True

    def __bool__(self) -> bool:
        return self.signalled or self.stop_file.exists()


def run_until_stopped(
    query: StreamingQuery,
    stop: StopRequest,
    batch_timeout: float = 600,
    say: Callable[[str], None] = print,
) -> None:
    while query.isActive:
        await_end(query, 1)
        if query.isActive and stop:
            say("==> stop requested: finishing the current batch")
            wait_for_running_batch(query, batch_timeout)
            query.stop()
    failure = query.exception()
    if failure is not None:
        # Spark's message leads with the cause; the full trace is in the job's log.
        raise QueryFailedError(str(failure).strip().splitlines()[0][:2000])


def await_end(query: StreamingQuery, seconds: int) -> None:
    """Wait up to `seconds` for the query to end. Spark raises here when it ended on an error;
    the callers read that error from query.exception(), to report it as theirs."""
    from pyspark.errors import StreamingQueryException

    with contextlib.suppress(StreamingQueryException):
        query.awaitTermination(seconds)


def wait_for_running_batch(query: StreamingQuery, timeout: float) -> None:
    """Until no batch runs, or the one running now has committed (then the next has at most
    just begun: stopping it there is safe, as any stop is, and it is redone on restart).
    Not "until no batch runs": behind a backlog the next batch starts as soon as one
    commits, so that moment may not come before the backlog is read."""
    deadline = time.monotonic() + timeout
    running = _last_committed(query)
    while (
        query.isActive
        and query.status["isTriggerActive"]
        and _last_committed(query) == running
        and time.monotonic() < deadline
    ):
        time.sleep(0.05)


def _last_committed(query: StreamingQuery) -> int | None:
    progress = query.lastProgress
    return None if progress is None else int(progress["batchId"])


def start_spark(settings: Settings, stop: StopRequest) -> SparkSession:
    spark = get_spark(QUERY_NAME, settings)
    stop.take_over(spark)
    return spark


def run_speed_layer(
    settings: Settings, stop_file: Path, available_now: bool, say: Callable[[str], None]
) -> None:
    """Run the live speed layer until it is asked to stop (or, `available_now`, until it has
    read what the log holds). Raises QueryFailedError when the query stops on an error."""
    ensure_topic(settings)
    run_stream(
        settings,
        QUERY_NAME,
        "speed layer",
        stop_file,
        lambda spark: start_query(spark, settings, SpeedOutputs.live(), available_now),
        say,
    )


def run_stream(
    settings: Settings,
    writer: str,
    title: str,
    stop_file: Path,
    start: Callable[[SparkSession], StreamingQuery],
    say: Callable[[str], None],
) -> None:
    """Run the query `start` starts, as `writer` (its lock held throughout), until it ends or
    is asked to stop (Ctrl-C, SIGTERM, `stop_file`). `title` names it in what it says."""
    stop = StopRequest(stop_file)
    if settings.storage.on_s3:
        ensure_bucket(settings)
    with exclusive_writer(settings, writer):
        # Only once the job can run: a stale request must not stop the new run, but a run that
        # cannot start (another one holds the lock) must leave a pending request as it is.
        stop.stop_file.unlink(missing_ok=True)
        spark = start_spark(settings, stop)
        query = start(spark)
        say(
            f"==> {title} running (query id {query.id}); stop with Ctrl-C, SIGTERM or "
            f"`touch {stop.stop_file}`"
        )
        run_until_stopped(query, stop, say=say)


def catch_up(spark: SparkSession, settings: Settings, say: Callable[[str], None] = print) -> str:
    """Run the live speed layer until it has read the whole log, or, when it is already
    running (its lock is held), wait until it has. Says which it was."""
    try:
        with exclusive_writer(settings, QUERY_NAME):
            say("==> running the speed layer until it has caught up")
            start_query(spark, settings, SpeedOutputs.live(), available_now=True).awaitTermination()
            return "ran the speed layer (trigger availableNow)"
    except WriterBusyError:
        say("==> the speed layer is already running; waiting for it to catch up")
        wait_for_running_stream(spark, settings, timeout=600)
        return "the running speed layer caught up"


def wait_for_running_stream(spark: SparkSession, settings: Settings, timeout: float) -> None:
    from pyspark.sql import functions as F

    progress = SpeedOutputs.live().progress
    target = end_offsets(settings)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if table_exists(spark, progress, settings):
            newest = (
                spark.read.format("delta")
                .load(progress.path(settings))
                .orderBy(F.col("processed_at").desc())
                .select("offsets")
                .first()
            )
            done = dict(newest["offsets"] or {}) if newest else {}
            if all(done.get(p, 0) >= end for p, end in target.items()):
                return
        time.sleep(3)
    raise TimeoutError(f"the running speed layer did not catch up within {timeout:.0f}s")
