"""Kappa replays against real Kafka, Spark and Delta: a replay of the log equals the batch
recompute, resumes exactly after a kill, is promoted and rolled back atomically for a reader,
refuses a start retention has deleted, and never touches the live stream's tables."""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from delta.tables import DeltaTable
from pyspark.sql import functions as F

from jobs.contract import Exit, read_result
from lakehouse.batch.recompute import Interval, recompute_interval
from lakehouse.core.config import Settings, load_settings
from lakehouse.core.delta_io import read_table, read_table_at
from lakehouse.core.kafka_io import ensure_topic, produce_json
from lakehouse.generator.clickstream import preset_config, produce
from lakehouse.reconcile.gate import gate
from lakehouse.reconcile.run import reconcile
from lakehouse.reconcile.sources import batch_source, speed_source, stream_source
from lakehouse.replay.plan import ReplayRequestError, ReplayStart, plan_replay
from lakehouse.replay.promotion import promote, rollback, serves_all_of
from lakehouse.replay.run import continue_log, run_replay
from lakehouse.replay.versions import (
    VersionError,
    active_version,
    list_versions,
    pins_of,
    pointer_history,
    served_tables,
)
from lakehouse.serving.serve import serve
from lakehouse.speed.micro_batch import MicroBatchProcessor
from lakehouse.speed.outputs import SpeedOutputs
from lakehouse.speed.stream import start_query
from lakehouse.transforms.dedup import DEDUP_COLUMNS
from lakehouse.transforms.views import VIEWS
from tests.conftest import new_topic
from tests.delta_files import WALL_CLOCK, commits
from tests.jobs_in_process import Ran, RunJob

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

HOUR = timedelta(hours=1)


def settings_for(root: Path, topic: str, **extra: str) -> Settings:
    env = {
        **os.environ,
        "TRIBUTARY__STORAGE__ROOT": str(root / "lake"),
        "TRIBUTARY__STORAGE__CHECKPOINTS": str(root / "checkpoints"),
        "TRIBUTARY__KAFKA__TOPIC": topic,
        "TRIBUTARY__SPEED__MAX_OFFSETS_PER_TRIGGER": "400",
        **{f"TRIBUTARY__{k.upper()}": v for k, v in extra.items()},
    }
    env.pop("TRIBUTARY_PROFILE", None)
    env.pop("TRIBUTARY__MODE", None)
    return load_settings("local", env)


def job_env(settings: Settings) -> dict[str, str]:
    """What a job run on these settings needs in its environment (for run_job_here)."""
    return {
        "TRIBUTARY_PROFILE": "local",
        "TRIBUTARY__STORAGE__ROOT": settings.storage.root,
        "TRIBUTARY__STORAGE__CHECKPOINTS": settings.storage.checkpoints,
        "TRIBUTARY__KAFKA__TOPIC": settings.kafka.topic,
    }


@dataclass
class Log:
    settings: Settings
    hours: Interval  # the closed hours the batch layer recomputed
    records: int


@pytest.fixture(scope="module")
def log(spark: SparkSession, kafka_up: str, tmp_path_factory: pytest.TempPathFactory) -> Log:
    """Three hours of events with every anomaly, streamed live in two micro-batches (the
    second's events older than the first's watermark are set aside as late: a replay of the
    whole log in one batch has none), and the batch layer run over the closed hours."""
    tmp = tmp_path_factory.mktemp("replay")
    count = 1500
    live_batch = str(count // 2)
    settings = settings_for(tmp, new_topic("replay"), speed__max_offsets_per_trigger=live_batch)
    this_hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    start = this_hour - 3 * HOUR
    rate = count / (datetime.now(UTC) - start).total_seconds()
    cfg = preset_config("all", {}, count=count, seed=11, start=start, rate=rate, users=20)
    produce(settings, cfg, tmp / "ledger.jsonl")
    start_query(spark, settings, SpeedOutputs.live(), available_now=True).awaitTermination()
    hours = Interval(start, this_hour)
    recompute_interval(spark, settings, hours, "batch")
    return Log(settings, hours, count)


@pytest.fixture(scope="module")
def v1(spark: SparkSession, log: Log) -> str:
    """A replay of the whole log, uninterrupted."""
    plan = plan_replay(log.settings, log.settings.kafka.topic, ReplayStart("earliest"))
    assert run_replay(spark, log.settings, plan, "v1").status == "caught_up"
    return "v1"


@pytest.fixture(scope="module")
def batched(spark: SparkSession, log: Log) -> str:
    """A replay of the whole log in two micro-batches: late events in the second."""
    plan = plan_replay(log.settings, log.settings.kafka.topic, ReplayStart("earliest"))
    per_batch = -(-log.records // 2)
    assert run_replay(spark, log.settings, plan, "batched", False, per_batch).status == "caught_up"
    return "batched"


def assert_equals_batch_and_live(spark: SparkSession, settings: Settings, version: str) -> None:
    """Batch vs the version and the version vs live, window by window: every window equal, or
    its difference an event recorded as late (the reconciliation gate), over 100+ windows."""
    replay = stream_source(SpeedOutputs.replay(version), f"replay_{version}")
    for left, right in ((batch_source(), replay), (replay, speed_source())):
        run = reconcile(
            spark, settings, left, right, list(VIEWS), f"test-{left.name}", datetime.now(UTC)
        )
        try:
            verdict = gate(run, require_compared=True)
            assert verdict.passed, verdict.message()
            assert run.compared > 100
        finally:
            run.release()


def counts(spark: SparkSession, settings: Settings, outputs: SpeedOutputs) -> set[tuple]:
    df = read_table(spark, outputs.counts, settings)
    return {tuple(r) for r in df.collect()}


def test_a_replay_from_earliest_equals_the_batch_recompute(
    spark: SparkSession, log: Log, v1: str
) -> None:
    assert_equals_batch_and_live(spark, log.settings, v1)
    # The whole log in one micro-batch: nothing is late, so the replay's closed windows are
    # the batch's, exactly.
    batch = spark.read.format("delta").load(f"{log.settings.storage.root}/batch/event_counts_1m")
    in_hours = batch.where(log.hours.condition("window_start"))
    replayed = read_table(spark, SpeedOutputs.replay(v1).counts, log.settings)
    assert {tuple(r) for r in in_hours.collect()} == {
        tuple(r) for r in replayed.where(log.hours.condition("window_start")).collect()
    }
    [info] = [v for v in list_versions(log.settings) if v.version == v1]
    assert info.status == "caught_up" and info.start == "earliest" and info.records == log.records

    # A quarantined record is kept whole (value, key, topic), as the live stream keeps it;
    # but for a conflicting duplicate, which passed validation: a replay keeps no bytes of
    # accepted records, and names it by its position and its first delivery's (its bytes are
    # in live bronze).
    def quarantine(outputs: SpeedOutputs, conflicts: bool) -> set[tuple]:
        df = read_table(spark, outputs.quarantine, log.settings).drop("quarantined_at")
        conflict = F.array_contains("reasons", "conflicting_duplicate")
        df = df.where(conflict if conflicts else ~conflict).drop("reasons")
        if conflicts:
            df = df.drop("key", "value", "value_bytes")
        return {tuple(r) for r in df.collect()}

    live_quarantine = quarantine(SpeedOutputs.live(), conflicts=False)
    assert len(live_quarantine) > 10
    assert quarantine(SpeedOutputs.replay(v1), conflicts=False) == live_quarantine
    live_conflicts = quarantine(SpeedOutputs.live(), conflicts=True)
    assert live_conflicts
    assert quarantine(SpeedOutputs.replay(v1), conflicts=True) == live_conflicts
    # A version holds what it derives; the log itself is not copied again.
    version_root = Path(SpeedOutputs.replay(v1).silver.path(log.settings)).parent
    assert sorted(p.name for p in version_root.iterdir()) == [
        "active_users_10m",
        "event_counts_1m",
        "events",
        "late_events",
        "progress",
        "quarantine",
        "user_sessions",
    ]


def test_a_replay_in_micro_batches_equals_the_batch_and_keeps_first_deliveries(
    spark: SparkSession, log: Log, batched: str
) -> None:
    """The log holds every anomaly (re-deliveries with another event_time or page, events
    far ahead of the stream, bytes that are not UTF-8, numbers for strings): replayed in two
    micro-batches, with late events in the second, silver holds each event_id once at its
    first delivery, as the live stream's does, and batch = replay + late, window by window."""
    progress = read_table(spark, SpeedOutputs.replay(batched).progress, log.settings)
    sizes = [r["input_rows"] for r in progress.collect()]
    assert len(sizes) >= 2 and max(sizes) < log.records, sizes
    assert_equals_batch_and_live(spark, log.settings, batched)

    def firsts(outputs: SpeedOutputs) -> list[tuple]:
        rows = read_table(spark, outputs.silver, log.settings)
        return sorted(tuple(r) for r in rows.select(*DEDUP_COLUMNS).collect())

    replayed = firsts(SpeedOutputs.replay(batched))
    assert len({r[0] for r in replayed}) == len(replayed), "each event_id once"
    assert replayed == firsts(SpeedOutputs.live())


def test_a_replay_interrupted_mid_batch_resumes_to_the_same_result(
    spark: SparkSession,
    log: Log,
    batched: str,
    monkeypatch: pytest.MonkeyPatch,
    run_job_here: RunJob,
) -> None:
    """A replay whose query fails in the middle of a micro-batch, with some of the batch's
    tables written and the others and its progress row not (what a kill at that moment
    leaves), says so (status failed, exit 5), and running it again with the same version
    resumes it (the job's resume rule included) to the tables an uninterrupted replay with
    the same batches (`batched`) writes. The failure is injected in this process; killing a
    process is the speed layer's kill -9 test (test_speed_layer_restarts), whose restart is
    the same query on the same checkpoint. Two batches are enough: the second fails after the first
    committed, so the resume must read the first's state back and redo only the second."""
    per_batch = str(-(-log.records // 2))
    view_write = MicroBatchProcessor.append_view

    def fails_in_batch_1(
        self: MicroBatchProcessor,
        spark: SparkSession,
        rows: DataFrame,
        name: str,
        app: str,
        batch_id: int,
        untouched: bool = False,
    ) -> None:
        if self.outputs.name == "replay_interrupted" and batch_id == 1 and name == "sessions":
            raise RuntimeError("injected failure in the sessions write of batch 1")
        view_write(self, spark, rows, name, app, batch_id, untouched)

    job = ["jobs.replay", "--version", "interrupted", "--max-offsets-per-trigger", per_batch]
    with monkeypatch.context() as patched:
        patched.setattr(MicroBatchProcessor, "append_view", fails_in_batch_1)
        failed = run_job_here(*job, **job_env(log.settings))
    assert failed.returncode == Exit.FAILED, failed.stderr[-3000:]
    assert "replay interrupted failed: " in failed.stderr, failed.stderr[-3000:]
    assert "run it again to resume" in failed.stderr
    [info] = [v for v in list_versions(log.settings) if v.version == "interrupted"]
    assert info.status == "failed"
    interrupted = SpeedOutputs.replay("interrupted")
    history = {
        name: commits(getattr(interrupted, name).path(log.settings))
        for name in ("silver", "sessions", "progress")
    }
    assert history == {"silver": 2, "sessions": 1, "progress": 1}, "batch 1 is half-written"

    resumed = run_job_here(*job, **job_env(log.settings))
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert _replay_result(resumed.stdout)["records"] == log.records

    for name in ("silver", "counts", "active_users", "sessions", "late", "quarantine", "progress"):
        interrupted_rows, whole_rows = (
            _rows(spark, getattr(SpeedOutputs.replay(v), name).path(log.settings))
            for v in ("interrupted", batched)
        )
        assert interrupted_rows == whole_rows, name


def test_promotion_and_rollback_are_atomic_for_a_polling_reader(
    spark: SparkSession, log: Log, v1: str
) -> None:
    kappa = log.settings.model_copy(update={"mode": "kappa"})

    def answer() -> frozenset:
        served, _ = serve(spark, kappa, "event_counts_1m")
        return frozenset(tuple(r) for r in served.drop("source").collect())

    live = answer()
    seen: list[frozenset] = []
    stop = threading.Event()

    def poll() -> None:
        while not stop.is_set():
            seen.append(answer())

    reader = threading.Thread(target=poll)
    reader.start()
    try:
        promote(spark, kappa, v1, force=False)
        assert active_version(kappa) == v1
        promoted = answer()
        _wait_for(lambda: promoted in seen, 120, "the reader to see the promoted version")
        rollback(spark, kappa)
        assert active_version(kappa) == "live"
    finally:
        stop.set()
        reader.join()
    assert live != promoted, "the replay must serve the late events the live views lack"
    assert answer() == live
    assert seen and all(a in (live, promoted) for a in seen), "a reader saw a mix"


def test_switching_lambda_kappa_lambda_keeps_the_answers_equal_to_batch(
    spark: SparkSession, log: Log, v1: str
) -> None:
    kappa = log.settings.model_copy(update={"mode": "kappa"})
    lambda_ = log.settings.model_copy(update={"mode": "lambda"})
    batch = spark.read.format("delta").load(f"{log.settings.storage.root}/batch/event_counts_1m")
    expected = {tuple(r) for r in batch.where(log.hours.condition("window_start")).collect()}

    def closed_hours(settings: Settings) -> set[tuple]:
        served, _ = serve(spark, settings, "event_counts_1m", log.hours.start, log.hours.end)
        return {tuple(r) for r in served.drop("source").collect()}

    promote(spark, kappa, v1, force=False)
    try:
        assert closed_hours(lambda_) == expected
        assert closed_hours(kappa) == expected
        assert closed_hours(lambda_) == expected
    finally:
        rollback(spark, kappa)


def test_the_retention_guard_refuses_a_deleted_start_and_force_records_the_gap(
    spark: SparkSession, log: Log, tmp_path: Path
) -> None:
    from kafka import KafkaAdminClient, TopicPartition

    topic = new_topic("retention")
    settings = settings_for(tmp_path, topic)
    ensure_topic(settings, partitions=1)
    now = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    event = {"event_type": "click", "user_id": "u1", "page": "/", "event_time": now}
    produce_json(settings, [("u1", {**event, "event_id": f"e{i}"}) for i in range(30)])
    # What retention does to old segments, done at once: the log now starts at offset 10.
    admin = KafkaAdminClient(bootstrap_servers=settings.kafka.bootstrap_servers)
    try:
        admin.delete_records({TopicPartition(topic, 0): 10})
    finally:
        admin.close()

    for start in (
        ReplayStart("earliest"),
        ReplayStart("timestamp", timestamp=datetime(2026, 1, 1, tzinfo=UTC)),
    ):
        with pytest.raises(ReplayRequestError, match="no longer holds the requested start"):
            plan_replay(settings, topic, start)
    plan = plan_replay(settings, topic, ReplayStart("earliest"), force=True)
    assert plan.gaps == {0: 10} and plan.records == 20
    assert run_replay(spark, settings, plan, "gap").status == "caught_up"
    [info] = list_versions(settings)
    assert info.forced and info.gaps == {0: 10} and info.records == 20


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--version", "Not A Name"], "not a simple identifier"),
        (["--start", "timestamp", "--timestamp", "2099-01-01T00:00Z"], "in the future"),
        (["--topic", "no-such-topic-anywhere"], "does not exist"),
        (["--start", "earliest", "--offsets", '{"0": 1}'], "neither a timestamp nor offsets"),
        (["--start", "offsets", "--offsets", "[1, 2]"], "JSON object of partition"),
        (["--start", "sideways"], "unknown start"),
        (["--extend", "Not A Name"], "not a simple identifier"),
        (["--extend", "v1", "--start", "timestamp"], "takes no --start"),
        (["--extend", "v1", "--version", "v2"], "takes no --version"),
        (["--extend", "v1", "--scheduled"], "takes no --scheduled"),
        (["--scheduled", "--force"], "--scheduled continues from where a version ended"),
        (["--extend", "nowhere"], "no version 'nowhere' to extend"),
    ],
)
def test_bad_replay_parameters_are_refused_and_write_nothing(
    args: list[str], message: str, kafka_up: str, tmp_path: Path, run_job_here: RunJob
) -> None:
    settings = settings_for(tmp_path, "events")
    job = run_job_here("jobs.replay", *args, **job_env(settings))
    assert job.returncode == 2, job.stderr
    assert message in job.stderr and "nothing written" in job.stderr, job.stderr
    assert "Traceback" not in job.stderr
    assert not Path(settings.storage.root).exists()


# --- extensions: a replay of the recent log ---------------------------------------------------


def _produce_part(
    settings: Settings, tmp: Path, seed: int, start: datetime, end: datetime, count: int
) -> None:
    rate = count / (end - start).total_seconds()
    cfg = preset_config("all", {}, count=count, seed=seed, start=start, rate=rate, users=20)
    produce(settings, cfg, tmp / f"ledger-{seed}.jsonl")


def _extend(run_job_here: RunJob, settings: Settings, version: str) -> Ran:
    return run_job_here("jobs.replay", "--extend", version, **job_env(settings))


def _replay_result(stdout: str) -> dict[str, Any]:
    parsed = read_result("replay", stdout.splitlines())
    assert parsed is not None, stdout
    return parsed


def test_an_extension_reads_only_the_recent_log_and_its_windows_equal_the_batch(
    spark: SparkSession, kafka_up: str, tmp_path: Path, run_job_here: RunJob
) -> None:
    settings = settings_for(tmp_path, new_topic("extend"))
    this_hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    start, middle = this_hour - 3 * HOUR, this_hour - HOUR
    _produce_part(settings, tmp_path, 21, start, middle, 1000)
    plan = plan_replay(settings, settings.kafka.topic, ReplayStart("earliest"))
    assert run_replay(spark, settings, plan, "v1").status == "caught_up"
    _produce_part(settings, tmp_path, 22, middle, datetime.now(UTC), 400)

    extended = _extend(run_job_here, settings, "v1")
    assert extended.returncode == 0, extended.stderr[-3000:]
    result = _replay_result(extended.stdout)
    # Only what the log gained since v1's run was read, and v1 now holds all of it.
    assert result["new_records"] == 400 and result["extended"] and not result["active"]
    [info] = [v for v in list_versions(settings) if v.version == "v1"]
    assert (info.status, info.extensions, info.records) == ("caught_up", 1, 1400)
    ends = plan_replay(settings, settings.kafka.topic, ReplayStart("earliest")).end_offsets
    assert info.end_offsets == ends

    # The extended version against the batch layer and the live stream, window by window:
    # equal, or the difference is an event v1 recorded as late (part two's late events were
    # older than v1's watermark).
    start_query(spark, settings, SpeedOutputs.live(), available_now=True).awaitTermination()
    recompute_interval(spark, settings, Interval(start, this_hour), "batch")
    assert_equals_batch_and_live(spark, settings, "v1")
    late = read_table(spark, SpeedOutputs.replay("v1").late, settings)
    assert late.count() > 0, "part two's late events are recorded, not dropped"

    # Nothing new in the log: nothing to do, nothing recorded.
    again = _extend(run_job_here, settings, "v1")
    assert again.returncode == 0, again.stderr[-3000:]
    assert "nothing new" in again.stdout and _replay_result(again.stdout)["new_records"] == 0
    [info] = [v for v in list_versions(settings) if v.version == "v1"]
    assert info.extensions == 1


def test_the_scheduled_kappa_run_extends_the_active_version_and_serves_it_once_checked(
    spark: SparkSession,
    kafka_up: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    run_job_here: RunJob,
) -> None:

    settings = settings_for(tmp_path, new_topic("scheduled"))
    kappa = settings.model_copy(update={"mode": "kappa"})
    now = datetime.now(UTC)
    _produce_part(settings, tmp_path, 31, now - 3 * HOUR, now - 2 * HOUR, 300)
    # No version is active yet: the scheduled run replays the whole log into a new version.
    assert continue_log(settings, None, dry_run=True).status == "planned"
    assert "no replay version is active yet" in capsys.readouterr().out
    assert list_versions(settings) == [], "a dry run writes nothing"
    assert continue_log(settings, None, dry_run=False).status == "caught_up"
    [first] = list_versions(settings)
    assert (first.version, first.status, first.records) == ("v1", "caught_up", 300)

    def served_until() -> datetime | None:
        served, coverage = serve(spark, kappa, "event_counts_1m")
        assert served.where("source = 'replay_v1'").count() > 0
        return coverage.high_water

    start_query(spark, settings, SpeedOutputs.live(), available_now=True).awaitTermination()
    promote(spark, kappa, "v1", force=False)
    promoted = served_until()
    _produce_part(settings, tmp_path, 32, now - 2 * HOUR, now - HOUR, 200)
    capsys.readouterr()
    outcome = continue_log(kappa, None, dry_run=False)
    assert outcome.status == "caught_up" and outcome.result is not None
    out = capsys.readouterr().out
    assert "is the active version: serving reads what this run added now" in out, out
    assert outcome.result["new_records"] == 200 and outcome.result["served"]
    [extended] = list_versions(settings)
    assert (extended.version, extended.extensions, extended.records) == ("v1", 1, 500)
    assert active_version(settings) == "v1"
    checked = served_until()
    assert promoted is not None and checked is not None and checked > promoted + HOUR / 2

    # The live views disagree with what v1 adds next (as a bug in either would make them):
    # the extension is written, but its gate fails and serving keeps reading v1 as it was.
    _produce_part(settings, tmp_path, 33, now - HOUR, datetime.now(UTC), 100)
    start_query(spark, settings, SpeedOutputs.live(), available_now=True).awaitTermination()
    live_counts = DeltaTable.forPath(spark, SpeedOutputs.live().counts.path(settings))
    live_counts.delete(F.col("window_start") >= F.lit(now - 2 * HOUR))
    pins = pins_of(pointer_history(settings), "v1")
    assert pins is not None
    as_served = _served_rows(spark, settings, "v1", pins)
    # Its stream also folds its views and compacts and vacuums every table after each batch,
    # with no retention at all, as a week of failing gates would with the default: what the
    # pins read must stay readable.
    vacuuming = kappa.speed.model_copy(
        update={"compact_every_batches": 1, "vacuum_every_batches": 1, "vacuum_after_hours": 0}
    )
    outcome = continue_log(kappa.model_copy(update={"speed": vacuuming}), None, dry_run=False)
    assert outcome.not_served and outcome.result is not None
    out = capsys.readouterr().out
    replaced = _served_files(spark, settings, "v1", pins) - _served_files(spark, settings, "v1")
    assert replaced, "the extension replaced files the pins read (else nothing was at risk)"
    assert _served_rows(spark, settings, "v1", pins) == as_served
    assert "v1 is the active version, but its gate failed" in out, out
    assert "reconciliation gate failed" in out and not outcome.result["served"]
    assert "serving reads v1 as its last passed gate saw it (" in outcome.result["unserved"]
    assert [v.extensions for v in list_versions(settings)] == [2]
    assert served_until() == checked, "an unchecked extension is not served"
    assert not serves_all_of(kappa, "v1")
    listed = run_job_here("jobs.versions", "list", **job_env(settings))
    assert listed.returncode == 0, listed.stderr
    assert "serving reads v1 as its last passed gate saw it (" in listed.stdout, listed.stdout
    with pytest.raises(VersionError, match="refused"):
        promote(spark, kappa, "v1", force=False)
    assert served_until() == checked
    assert "forced" in promote(spark, kappa, "v1", force=True)
    assert served_until() > checked  # type: ignore[operator]
    assert serves_all_of(kappa, "v1")


def test_a_replay_leaves_the_running_live_stream_untouched(
    spark: SparkSession, kafka_up: str, tmp_path: Path
) -> None:
    """The live stream runs its own query while a replay runs, and keeps committing fresh
    micro-batches into its own tables, which gain every event once; the replay writes only
    its version's. Both queries run in this process (the live stream is not under test as a
    process: what a replay could break is its tables, checkpoint and progress, which are the
    same here), so they also share one Spark application's scheduler."""
    settings = settings_for(tmp_path, new_topic("live"), speed__trigger_interval_seconds="1")
    ensure_topic(settings)
    produce_json(settings, list(_events("before", 300)))
    live = start_query(spark, settings, SpeedOutputs.live(), available_now=False)
    live_progress = SpeedOutputs.live().progress.path(settings)
    sending = threading.Event()
    sent = [300]

    def keep_sending() -> None:
        while not sending.is_set():
            sent[0] += produce_json(settings, list(_events(uuid.uuid4().hex[:6], 10)))
            time.sleep(0.5)

    producer = threading.Thread(target=keep_sending)
    try:
        _wait_for(
            lambda: _committed(live) and any(Path(live_progress, "_delta_log").glob("*.json")),
            300,
            "the live stream",
        )
        producer.start()
        before = _live_versions(spark, settings)
        replay_began = datetime.now(UTC)
        plan = plan_replay(settings, settings.kafka.topic, ReplayStart("earliest"))
        assert run_replay(spark, settings, plan, "beside").status == "caught_up"
        replay_ended = datetime.now(UTC)
        sending.set()
        producer.join()
        goal = sent[0]
        _wait_for(
            lambda: _consumed(spark, live_progress) >= goal, 180, "the live stream to catch up"
        )
        assert live.isActive and live.exception() is None
    finally:
        sending.set()
        live.stop()
    from pyspark.sql import functions as F

    progress = spark.read.format("delta").load(live_progress)
    # Micro-batches that were running while the replay ran (a batch can outlast a short
    # replay on a busy machine, so overlap counts, not only commits inside the window).
    began_at = F.col("processed_at") - F.make_interval(secs=F.col("duration_seconds"))
    during = progress.where(
        (F.col("processed_at") >= F.lit(replay_began)) & (began_at <= F.lit(replay_ended))
    ).collect()
    assert during, "the live stream kept processing micro-batches while the replay ran"
    assert (
        max(r["freshness_seconds"] for r in during if r["freshness_seconds"] is not None)
        < settings.speed.freshness_slo_seconds
    )
    after = _live_versions(spark, settings)
    assert all(after[name] > before[name] for name in ("raw", "progress"))
    silver = read_table(spark, SpeedOutputs.live().silver, settings)
    assert silver.count() == sent[0], "every live event is in the live silver table, once"
    # availableNow reads to the log's end when the query starts: the plan's end, or later.
    beside = SpeedOutputs.replay("beside")
    replayed = read_table(spark, beside.silver, settings).count()
    assert replayed == _consumed(spark, beside.progress.path(settings)) >= plan.records


def _served_files(
    spark: SparkSession, settings: Settings, version: str, at: dict[str, int] | None = None
) -> set[str]:
    """The data files of the tables serving reads of `version`, at versions `at` or latest."""
    files: set[str] = set()
    for name, t in served_tables(version).items():
        reader = spark.read.format("delta")
        if at is not None:
            reader = reader.option("versionAsOf", at[name])
        files |= set(reader.load(t.path(settings)).inputFiles())
    return files


def _served_rows(
    spark: SparkSession, settings: Settings, version: str, at: dict[str, int]
) -> dict[str, list[Any]]:
    """Every row of those tables at `at`, read from their files (a count may use statistics)."""
    rows = {}
    for name, t in served_tables(version).items():
        df = read_table_at(spark, t, settings, at[name])
        assert df is not None
        rows[name] = sorted(map(str, df.collect()))
    return rows


def _events(tag: str, n: int) -> Iterator[tuple[str, dict[str, Any]]]:
    now = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    for i in range(n):
        yield (
            f"u{i % 7}",
            {
                "event_id": f"{tag}-{i}",
                "event_type": "page_view",
                "user_id": f"u{i % 7}",
                "page": "/",
                "event_time": now,
            },
        )


def _live_versions(spark: SparkSession, settings: Settings) -> dict[str, int]:
    from delta.tables import DeltaTable

    out = SpeedOutputs.live()
    return {
        name: int(
            DeltaTable.forPath(spark, getattr(out, name).path(settings))
            .history(1)
            .first()["version"]
        )
        for name in ("raw", "progress")
    }


def _consumed(spark: SparkSession, progress: str) -> int:
    return int(
        spark.read.format("delta").load(progress).groupBy().sum("input_rows").first()[0] or 0
    )


def _committed(query: StreamingQuery) -> bool:
    """True once the query has made progress; fails at once if it stopped on an error."""
    assert query.isActive, query.exception()
    return query.lastProgress is not None


def _wait_for(check: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out after {timeout:.0f} s waiting for {what}"
        time.sleep(1)


def _rows(spark: SparkSession, path: str) -> list[tuple[str, ...]]:
    """A table's rows without WALL_CLOCK columns, as sorted text (maps by key)."""
    df = spark.read.format("delta").load(path)
    kept = df.select(*(c for c in df.columns if c not in WALL_CLOCK))
    return sorted(
        tuple(str(sorted(v.items()) if isinstance(v, dict) else v) for v in row)
        for row in kept.collect()
    )
