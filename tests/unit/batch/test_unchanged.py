"""A batch interval whose last run still stands is not recomputed again, and says why; an
appended event within its reach, a rewrite of bronze, a run not yet final or --force each make
it recompute (lakehouse/batch/unchanged.py)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from jobs.contract import Exit, read_result
from lakehouse.batch.recompute import Interval, IntervalUnchanged, recompute_interval
from lakehouse.batch.unchanged import (
    BRONZE,
    RUNS,
    Unchanged,
    appended_since,
    bronze_unchanged,
    last_run_of,
    unchanged_since_last_run,
)
from lakehouse.core.delta_io import append_once, read_table, small_frame, table_version
from lakehouse.transforms.bronze import to_raw_records
from lakehouse.transforms.windows import SESSION_GAP_SECONDS
from tests.jobs_in_process import batch_job_without_spark
from tests.lakehouses import job_env
from tests.micro_batches import raw_kafka_records

pytestmark = pytest.mark.slow  # make test-fast leaves it out (docs/testing.md)

HOUR = timedelta(hours=1)
GAP = timedelta(seconds=SESSION_GAP_SECONDS)


def event(event_id: str, user: str, at: datetime) -> tuple[bytes, bytes]:
    body = {
        "event_id": event_id,
        "event_type": "click",
        "user_id": user,
        "page": "/",
        "event_time": at.isoformat().replace("+00:00", "Z"),
    }
    return user.encode(), json.dumps(body).encode()


def test_an_interval_recomputed_again_is_a_no_op_until_something_within_its_reach_changes(
    spark, local_settings, run_job_here, monkeypatch, tmp_path
) -> None:
    settings = local_settings
    start = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - 6 * HOUR
    hour = Interval(start, start + HOUR)
    # Sessions in the hour, the last one ending 10 minutes before its end; and events three
    # hours on, enough for the watermark to make every view of the hour final.
    events = [event(f"a{i}", "u1", start + timedelta(minutes=5 * i)) for i in range(11)]
    events += [event(f"later{i}", "u9", start + 3 * HOUR + timedelta(seconds=i)) for i in range(6)]
    offset = 0

    def append(records: list[tuple[bytes, bytes]]) -> None:
        nonlocal offset
        batch = raw_kafka_records(spark, records, offset).transform(to_raw_records)
        append_once(batch, BRONZE, settings, "t", offset)
        offset += len(records)

    append(events)
    first = recompute_interval(spark, settings, hour, "first")
    assert first.events == 11
    last = last_run_of(settings, hour)
    assert last is not None and last.run_id == "first" and last.final

    with pytest.raises(IntervalUnchanged, match=r"unchanged since run first \(bronze unchanged\)"):
        recompute_interval(spark, settings, hour, "second")
    # The job answers that one before it starts Spark: delta-rs reads the run and bronze.
    read = first.bronze_version
    assert bronze_unchanged(settings, hour) == Unchanged("first", read, read, 0)
    env = job_env(settings, tmp_path / "state")
    ran = batch_job_without_spark(
        run_job_here, monkeypatch, "jobs.batch_layer", (hour.start, hour.end), env
    )
    assert ran.returncode == Exit.NOTHING_TO_DO, ran.stderr
    assert "unchanged since run first (bronze unchanged): nothing recomputed" in ran.stderr
    # And names the run that stands for whoever ran it (a DAG's task: dags/batch_layer.py).
    assert read_result("batch", ran.stdout.splitlines()) == {
        "interval": str(hour),
        "standing_run": "first",
    }

    # Appended since: an event far after the hour's reach, and a record validation refuses.
    append([event("far", "u2", start + 5 * HOUR), (b"u1", b"{not json")])
    with pytest.raises(IntervalUnchanged, match=r"2 records appended to bronze since") as said:
        recompute_interval(spark, settings, hour, "third")
    assert bronze_unchanged(settings, hour) is None  # Spark's to decide, reading what came
    session_reach = start + 50 * timedelta(minutes=1) + GAP
    assert f"and {session_reach:%Y-%m-%dT%H:%M:%SZ}" in str(said.value)
    runs = read_table(spark, RUNS, settings)
    assert {r["run_id"] for r in runs.select("run_id").collect()} == {"first"}

    # --force recomputes it all the same, and that run stands from then on.
    forced = recompute_interval(spark, settings, hour, "forced", force=True)
    assert forced.events == 11
    runs = read_table(spark, RUNS, settings)
    assert {r["run_id"] for r in runs.select("run_id").collect()} == {"first", "forced"}

    # A late event after the hour, within the gap after its last session: that session grows.
    append([event("late", "u1", session_reach - timedelta(minutes=1))])
    assert unchanged_since_last_run(spark, settings, hour) is None
    reach = (hour.start - GAP, session_reach)
    assert appended_since(spark, settings, forced.bronze_version, reach) == (1, 1)

    # Only appends are read as "since": a rewrite (here: bronze overwritten with its own rows,
    # as a migration does) may have changed anything.
    latest = table_version(spark, BRONZE, settings)
    assert latest is not None
    rows = read_table(spark, BRONZE, settings).localCheckpoint()
    rows.write.format("delta").mode("overwrite").save(BRONZE.path(settings))
    assert appended_since(spark, settings, latest, reach) is None

    # A run of the hour whose views were not all final stands for nothing.
    later = Interval(start + 2 * HOUR, start + 3 * HOUR)
    not_final = [
        {
            "run_id": "open",
            "view": view,
            "interval_start": later.start,
            "interval_end": later.end,
            "final_until": later.start if view == "user_sessions" else later.end,
            "rows": 1,
            "table_version": 0,
            "bronze_version": 0,
            "ingest_high_water": later.end,
            "watermark": later.end,
            "events": 1,
            "started_at": later.end,
            "finished_at": later.end,
            "duration_seconds": 1.0,
        }
        for view in ("event_counts_1m", "active_users_10m", "user_sessions")
    ]
    append_once(small_frame(spark, not_final, RUNS), RUNS, settings, "t", 0)
    open_run = last_run_of(settings, later)
    assert open_run is not None and not open_run.final
    assert unchanged_since_last_run(spark, settings, later) is None
