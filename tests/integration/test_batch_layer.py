"""The batch layer against real Kafka, Spark and Delta: a day of events with every anomaly,
streamed by the speed layer, then recomputed from bronze and checked

- against the speed layer (lambda correctness: batch = speed + late, window by window),
- against an independent pandas recomputation from the generator's ledger,
- for independence from how time is cut (hourly runs = 1 daily run = overlapping runs),
- for atomicity (a run that fails mid-write leaves every table readable and the seam unmoved),
- and through the serving layer (the seam, reads during a write, the `tributary` command).

The day is streamed once per test run (tests/integration/streamed_day.py, shared with the
reconciliation tests); each test recomputes in a copy of what the stream wrote, or of the
lakehouse the seam's run left, so no two tests build the same state.
"""

from __future__ import annotations

import io
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
import pytest

from jobs.contract import Exit
from lakehouse.batch import recompute
from lakehouse.batch.recompute import Interval, NoDataError, recompute_interval, vacuum_if_due
from lakehouse.core.config import Settings
from lakehouse.core.delta_io import read_table
from lakehouse.core.tables import table
from lakehouse.serving.serve import serve
from lakehouse.transforms.views import VIEWS
from tests.delta_files import replaced_files
from tests.delta_rs import read_every_table
from tests.integration import speed_checks as expect
from tests.integration.streamed_day import Day, recomputed_day, streamed_day
from tests.integration.tributary_here import run_tributary
from tests.jobs_in_process import Ran, RunJob

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

HOUR = timedelta(hours=1)


@pytest.fixture(scope="module")
def day(spark: SparkSession, kafka_up: str, tmp_path_factory: pytest.TempPathFactory) -> Day:
    return streamed_day(spark, tmp_path_factory)


@pytest.fixture(scope="module")
def daily(spark: SparkSession, day: Day) -> Settings:
    """The whole day recomputed in one run."""
    return recomputed_day(spark, day)


def rows(spark: SparkSession, settings: Settings, name: str, interval: Interval) -> set[tuple]:
    df = read_table(spark, table(name), settings)
    time_column = VIEWS[name.split(".", 1)[1]].time_column
    return {
        tuple(tuple(c) if isinstance(c, list) else c for c in r)
        for r in df.where(interval.condition(time_column)).collect()
    }


def all_views(spark: SparkSession, settings: Settings, interval: Interval) -> dict[str, set]:
    return {v.batch_table: rows(spark, settings, v.batch_table, interval) for v in VIEWS.values()}


# --- correctness ---------------------------------------------------------------------------


def test_batch_equals_speed_plus_late_window_by_window(
    spark: SparkSession, day: Day, daily: Settings
) -> None:
    late = read_table(spark, table("speed.late_events"), day.streamed)
    late_in_day = late.where(day.day.condition("event_time")).count()
    assert late_in_day > 10, "the anomalies must make the stream set events aside as late"

    def by_window(name: str, settings: Settings) -> dict[tuple, Any]:
        df = read_table(spark, table(name), settings)
        return {(r[0], r[2]): r for r in df.where(day.day.condition("window_start")).collect()}

    batch = by_window("batch.event_counts_1m", daily)
    speed = by_window("speed.event_counts_1m", day.streamed)
    late_counts = {
        (r["window_start"], r["event_type"]): (r["events"], r["amount_sum"])
        for r in late.transform(VIEWS["event_counts_1m"].compute).collect()
    }
    assert batch, "the batch layer wrote no windows"
    for key, b in batch.items():
        s_events, s_sum = (
            (speed[key]["events"], speed[key]["amount_sum"]) if key in speed else (0, 0)
        )
        l_events, l_sum = late_counts.get(key, (0, 0))
        assert (b["events"], b["amount_sum"]) == (s_events + l_events, s_sum + l_sum), key
    assert set(speed) <= set(batch), "every speed window is in the batch"

    batch_users = by_window("batch.active_users_10m", daily)
    speed_users = by_window("speed.active_users_10m", day.streamed)
    late_users = {
        (r["window_start"], r["page"]): (set(r["users"]), r["events"])
        for r in late.transform(VIEWS["active_users_10m"].compute).collect()
    }
    for key, b in batch_users.items():
        s = speed_users.get(key)
        users, events = late_users.get(key, (set(), 0))
        assert set(b["users"]) == (set(s["users"]) if s else set()) | users, key
        assert b["events"] == (s["events"] if s else 0) + events, key


def test_batch_equals_a_pandas_recomputation_from_the_ledger(
    spark: SparkSession, day: Day, daily: Settings
) -> None:
    accepted = expect.accepted(day.ledger)
    start, end = (ts.replace(tzinfo=None) for ts in (day.day.start, day.day.end))

    def inside(key_time: Any) -> bool:
        return start <= key_time < end

    counts = {
        (pd.Timestamp(r[0]), r[2]): (r[3], expect.to_cents(r[4]))
        for r in rows(spark, daily, "batch.event_counts_1m", day.day)
    }
    assert counts == {k: v for k, v in expect.minute_counts(accepted).items() if inside(k[0])}
    users = {
        (pd.Timestamp(r[0]), r[2]): set(r[3])
        for r in rows(spark, daily, "batch.active_users_10m", day.day)
    }
    assert users == {k: v for k, v in expect.sliding_users(accepted).items() if inside(k[0])}
    sessions = {
        (r[0], pd.Timestamp(r[1]), pd.Timestamp(r[2]), r[3], expect.to_cents(r[4]))
        for r in rows(spark, daily, "batch.user_sessions", day.day)
    }
    assert sessions == {s for s in expect.sessions(accepted) if inside(s[1])}
    assert len(sessions) > 50


def test_consecutive_hourly_runs_equal_one_daily_run(
    spark: SparkSession, day: Day, daily: Settings
) -> None:
    """Three hourly runs give the rows of their three hours exactly as the daily run does.

    The seam rule is the same at every cut: a row belongs to the run whose interval holds its
    time, and is computed from every event it depends on, before the interval (a sliding
    window's lookback, a session's quiet gap) and after it (a minute's tail, a session that
    goes on). Three runs cut time at four places, two between hourly runs and two at their
    outer edges, where the daily run has no cut; more hours would repeat the same cuts.
    Sessions that cross the cuts are asserted, so the seam is really crossed."""
    hourly = day.copy("hourly")
    first, end = 11, 14
    for k in range(first, end):
        recompute_interval(spark, hourly, day.hour(k), f"hour-{k}")
    hours = day.span(first, end)
    expected = all_views(spark, daily, hours)
    assert all(expected.values()), "every view has rows in the hours compared"
    assert all_views(spark, hourly, hours) == expected

    cuts = [day.hour(k).start.replace(tzinfo=None) for k in range(first, end + 1)]
    crossing = {
        cut
        for (_, start, end_, *_) in expected["batch.user_sessions"]
        for cut in cuts
        if start < cut <= end_
    }
    assert len(crossing) >= 2, f"sessions must cross the cuts; crossed: {sorted(crossing)}"


def test_overlapping_backfills_and_reruns_leave_identical_tables_and_a_due_vacuum_clears_up(
    spark: SparkSession, day: Day, daily: Settings
) -> None:
    """Two overlapping backfills and a rerun of the second leave the tables the daily run
    wrote, and one row per view per run in ops.batch_runs.

    The batch job is its tables' one writer, so it vacuums them: at the end of a run, each
    one whose last vacuum ended `batch.vacuum_every_hours` ago (or never) loses the files
    that runs replaced at least `batch.vacuum_after_hours` ago; one younger than that has
    nothing old enough, and is left alone. The overlap and the rerun are
    what replace files, so the same runs show it."""
    overlapping = day.copy("overlapping")
    views = [table(v.batch_table) for v in VIEWS.values()]
    names = tuple(t.name for t in views)

    def replaced() -> list[set[str]]:
        return [replaced_files(spark, t.path(overlapping)) for t in views]

    def retention(hours: int) -> Settings:
        batch = overlapping.batch.model_copy(update={"vacuum_after_hours": hours})
        return overlapping.model_copy(update={"batch": batch})

    first = recompute_interval(spark, retention(0), day.span(0, 14), "first")
    assert first.vacuumed == names, "never vacuumed yet: due at once"
    second = recompute_interval(spark, retention(0), day.span(10, 24), "second")
    assert second.vacuumed == (), "vacuumed less than vacuum_every_hours ago: not due"
    assert all(replaced()), "the overlap replaced files in every view"
    assert all_views(spark, overlapping, day.day) == all_views(spark, daily, day.day)
    recompute_interval(spark, overlapping, day.span(10, 24), "second-again")
    assert all_views(spark, overlapping, day.day) == all_views(spark, daily, day.day)
    runs = read_table(spark, table("ops.batch_runs"), overlapping)
    assert {r["run_id"] for r in runs.collect()} == {"first", "second", "second-again"}
    assert runs.count() == 3 * len(VIEWS), "one row per view per run"

    due = datetime.now(UTC) + timedelta(hours=overlapping.batch.vacuum_every_hours)
    assert vacuum_if_due(spark, retention(168), due) == (), "younger than the retention"
    a_week_on = due + timedelta(hours=168)
    assert vacuum_if_due(spark, retention(168), a_week_on) == names
    assert all(replaced()), "replaced less than vacuum_after_hours ago: kept"
    assert vacuum_if_due(spark, retention(0), a_week_on + timedelta(days=1)) == names
    assert not any(replaced())
    assert all_views(spark, overlapping, day.day) == all_views(spark, daily, day.day)


def test_a_run_that_fails_mid_write_leaves_readable_tables_and_no_run_record(
    spark: SparkSession, day: Day, daily: Settings, seam_run: Settings
) -> None:
    """A run dies while it writes one of its views: the write task fails after it has begun
    writing rows, while the other two views, written side by side with it, commit; the run
    record is never reached. Every table still reads as one whole run's result, the run is not
    recorded, the serving seam stays where it was, and a rerun completes the day.

    The failure is raised inside the Spark task that writes the files (a row it reaches
    raises), so the write stops midway as a killed job's would; only a test of the process
    itself (signals, kill -9) needs a process of its own."""
    failed = day.copy("failed", source="seam")
    rest = Interval(day.span(0, 16).end, day.day.end)
    before = all_views(spark, failed, day.day)
    complete = all_views(spark, daily, day.day)
    dying = VIEWS["user_sessions"].batch_table
    written: list[str] = []
    overwrite_where = recompute.overwrite_where

    def failing_in_one_write(df: DataFrame, target: Any, *args: Any) -> int:
        from pyspark.sql import functions as F

        written.append(target.name)
        if target.name == dying:
            fail = F.raise_error(F.lit("injected: the run dies writing a view"))
            # The task writes the rows it reads before the one that raises.
            df = df.where(F.when(F.monotonically_increasing_id() >= 5, fail).isNull())
        return overwrite_where(df, target, *args)

    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(recompute, "overwrite_where", failing_in_one_write)
        with pytest.raises(Exception, match="injected: the run dies writing a view"):
            recompute_interval(spark, failed, rest, "failed")
    assert sorted(written) == sorted(before), "each view's write began"

    after = all_views(spark, failed, day.day)  # every table is readable
    assert after[dying] == before[dying], f"{dying} is half-written"
    for name in after:
        if name != dying:
            assert after[name] == complete[name] != before[name], f"{name}: its commit is in"
    runs = read_table(spark, table("ops.batch_runs"), failed)
    assert "failed" not in {r["run_id"] for r in runs.collect()}
    _, coverage = serve(spark, failed, "event_counts_1m")
    assert coverage.high_water is not None and coverage.high_water <= day.span(0, 16).end, (
        "the serving seam must not move over a run that did not finish"
    )

    recompute_interval(spark, failed, rest, "rest")
    assert all_views(spark, failed, day.day) == complete


# --- serving -------------------------------------------------------------------------------


def served_counts(
    spark: SparkSession, settings: Settings, interval: Interval
) -> dict[tuple, tuple]:
    served, _ = serve(spark, settings, "event_counts_1m", interval.start, interval.end)
    return {
        (r["window_start"], r["event_type"]): (r["events"], r["amount_sum"], r["source"])
        for r in served.collect()
    }


@pytest.fixture(scope="module")
def seam_run(spark: SparkSession, day: Day) -> Settings:
    """Batch results for the day's first 16 hours, speed results after."""
    settings = day.copy("seam")
    recompute_interval(spark, settings, day.span(0, 16), "up-to-16h")
    return settings


def test_serving_is_batch_before_the_seam_and_speed_after(
    spark: SparkSession, day: Day, daily: Settings, seam_run: Settings
) -> None:
    _, coverage = serve(spark, seam_run, "event_counts_1m")
    seam = day.span(0, 16).end
    assert coverage.ranges == [(day.day.start, seam)]

    answer = served_counts(spark, seam_run, day.day)
    batch = {k: v for k, v in served_counts(spark, daily, day.day).items()}
    speed = {
        (r["window_start"], r["event_type"]): (r["events"], r["amount_sum"])
        for r in read_table(spark, table("speed.event_counts_1m"), day.streamed)
        .where(Interval(seam, day.day.end).condition("window_start"))
        .collect()
    }
    naive_seam = seam.replace(tzinfo=None)
    before = {k: v for k, v in answer.items() if k[0] < naive_seam}
    after = {k: v for k, v in answer.items() if k[0] >= naive_seam}
    assert {v[2] for v in before.values()} == {"batch"} and {v[2] for v in after.values()} == {
        "speed"
    }
    assert before == {k: v for k, v in batch.items() if k[0] < naive_seam}
    assert {k: v[:2] for k, v in after.items()} == speed
    # Across the whole range the answer is the batch recomputation, except where the stream
    # set events aside as late after the seam (the next batch run will take them in).
    late = read_table(spark, table("speed.late_events"), day.streamed)
    late_after = {
        (r["window_start"], r["event_type"])
        for r in late.transform(VIEWS["event_counts_1m"].compute).collect()
        if r["window_start"] >= naive_seam
    }
    differing = {k for k in batch if k not in answer or answer[k][:2] != batch[k][:2]}
    assert differing <= late_after


def tributary(run_job_here: RunJob, day: Day, *args: str) -> Ran:
    """The `tributary` command on the seam lakehouse (in this process: tests/integration/
    tributary_here.py; test_cli.py runs the installed command from a folder of its own)."""
    return run_tributary(run_job_here, *args, **day.environment("seam"))


def test_the_tributary_command_prints_the_served_answer(
    spark: SparkSession, day: Day, seam_run: Settings, run_job_here: RunJob
) -> None:
    start, end = day.span(12, 20).start, day.span(12, 20).end
    run = tributary(
        run_job_here,
        day,
        "query",
        "event_counts_1m",
        "--from",
        f"{start:%Y-%m-%dT%H:%MZ}",
        "--to",
        f"{end:%Y-%m-%dT%H:%MZ}",
        "--format",
        "csv",
        "--limit",
        "100000",
    )
    assert run.returncode == Exit.OK, run.stderr
    printed = pd.read_csv(io.StringIO(run.stdout), parse_dates=["window_start"])
    answer = {
        (r.window_start.to_pydatetime(), r.event_type): (r.events, round(r.amount_sum, 6), r.source)
        for r in printed.itertuples()
    }
    served = {
        k: (events, round(float(amount), 6), source)
        for k, (events, amount, source) in served_counts(
            spark, seam_run, Interval(start, end)
        ).items()
    }
    assert answer == served
    assert {v[2] for v in answer.values()} == {"batch", "speed"}, "the range crosses the seam"
    seam = day.span(0, 16).end
    assert f"batch results up to {seam:%Y-%m-%d %H:%M:%S}Z" in run.stderr


def test_the_serving_views_answer_spark_sql_from_the_tributary_command(
    spark: SparkSession, day: Day, seam_run: Settings, run_job_here: RunJob
) -> None:
    run = tributary(
        run_job_here,
        day,
        "sql",
        "SELECT source, event_type, sum(events) AS events FROM serving_event_counts_1m "
        f"WHERE window_start >= '{day.day.start:%Y-%m-%d %H:%M}' "
        f"AND window_start < '{day.day.end:%Y-%m-%d %H:%M}' GROUP BY 1, 2",
        "--format",
        "csv",
    )
    assert run.returncode == Exit.OK, run.stderr
    printed = pd.read_csv(io.StringIO(run.stdout))
    answer = {(r.source, r.event_type): r.events for r in printed.itertuples()}
    expected: dict[tuple[str, str], int] = {}
    for (_, event_type), (events, _, source) in served_counts(spark, seam_run, day.day).items():
        expected[(source, event_type)] = expected.get((source, event_type), 0) + events
    assert answer == expected

    wrong = tributary(run_job_here, day, "sql", "SELECT nothing FROM serving_no_such_view")
    assert wrong.returncode == Exit.BAD_REQUEST
    assert "serving_no_such_view" in wrong.stderr and "serving_user_sessions" in wrong.stderr
    assert "Traceback" not in wrong.stderr


def test_a_reader_sees_one_consistent_answer_while_a_batch_run_writes(
    spark: SparkSession, day: Day, seam_run: Settings
) -> None:
    settings = day.copy("concurrent", source="seam")  # batch results up to 16 h
    old = served_counts(spark, settings, day.day)
    writer = threading.Thread(
        target=recompute_interval, args=(spark, settings, day.span(16, 24), "second")
    )
    seen = []
    writer.start()
    while writer.is_alive():
        seen.append(served_counts(spark, settings, day.day))
    writer.join()
    new = served_counts(spark, settings, day.day)
    assert old != new, "the second run moves the seam"
    assert seen, "the reader must have read during the write"
    assert all(answer in (old, new) for answer in seen), "a reader saw a half-written state"


# --- bad input -----------------------------------------------------------------------------


def test_an_interval_without_events_writes_nothing(spark: SparkSession, day: Day) -> None:
    settings = day.copy("empty")
    year_ago = day.day.start - timedelta(days=365)
    with pytest.raises(NoDataError, match="no accepted event in"):
        recompute_interval(spark, settings, Interval(year_ago, year_ago + HOUR), "empty")
    for v in VIEWS.values():
        assert not Path(table(v.batch_table).path(settings)).exists()
    assert not Path(table("ops.batch_runs").path(settings)).exists()


@pytest.mark.parametrize(
    ("start", "end", "message"),
    [
        ("2026-01-01T11:00Z", "2026-01-01T10:00Z", "empty or reversed"),
        ("2026-01-01T10:00Z", "2026-01-01T10:00Z", "empty or reversed"),
        ("2099-01-01T10:00Z", "2099-01-01T11:00Z", "ends in the future"),
        ("2026-01-01T10:00:30Z", "2026-01-01T11:00Z", "not a whole minute"),
    ],
)
def test_a_bad_interval_is_refused_with_a_message(
    start: str, end: str, message: str, tmp_path: Path, run_job_here: RunJob
) -> None:
    job = run_job_here(
        "jobs.batch_layer",
        "--start",
        start,
        "--end",
        end,
        TRIBUTARY_PROFILE="local",
        TRIBUTARY__STORAGE__ROOT=str(tmp_path),
    )
    assert job.returncode == Exit.BAD_REQUEST, job.stderr
    assert message in job.stderr and "nothing written" in job.stderr
    assert "Traceback" not in job.stderr
    assert not any(tmp_path.iterdir()), "nothing may be written"


def test_every_table_the_day_left_reads_in_delta_rs(
    spark: SparkSession, day: Day, daily: Settings
) -> None:
    """The stream's and the batch layer's tables, after a day with every anomaly the
    generator makes, read by another Delta engine (delta-rs) and pandas."""
    read = read_every_table(spark, daily)
    written = {"bronze.events_raw", "bronze.quarantine", "silver.events", "ops.speed_progress"}
    assert written | {f"batch.{v}" for v in VIEWS} | {"ops.batch_runs"} <= set(read)
    assert len(read["bronze.events_raw"]) == len(day.ledger)
