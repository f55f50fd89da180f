"""jobs.quality's arguments: which tables and rows a run validates, and what it refuses
before anything starts (exit status 2, nothing written)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

import jobs.quality
from jobs.contract import Exit
from jobs.quality import build_parser, main
from lakehouse.core.config import load_settings
from lakehouse.core.tables import QUALITY, table
from lakehouse.core.times import EPOCH
from lakehouse.quality.runs import (
    LAYERS,
    TIME_COLUMNS,
    BadQualityRequest,
    QualityRequest,
    event_time_bounds,
)

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)


def request(*argv: str) -> QualityRequest:
    args = build_parser().parse_args(list(argv))
    return QualityRequest.checked(
        args.layer, args.tables, args.start, args.end, args.run_id, args.docs_dir, NOW
    )


def _went_too_far() -> None:
    pytest.fail("main() went past the argument checks: it would run on the real lakehouse")


def test_by_default_every_layer_and_the_last_two_days() -> None:
    r = request()
    assert r.tables == LAYERS["all"]
    assert (r.start, r.end) == (NOW - timedelta(days=2), NOW)
    assert r.run_id.startswith("manual:")
    assert r.docs_dir is None


def test_a_layer_and_tables_add_up_in_order_without_repeats() -> None:
    r = request("--layer", "quarantine", "--table", "silver.events", "bronze.quarantine")
    assert r.tables == ("bronze.quarantine", "silver.events")
    assert request("--table", "batch.user_sessions").tables == ("batch.user_sessions",)
    assert request("--layer", "speed").tables == tuple(
        f"speed.{v}" for v in ("event_counts_1m", "active_users_10m", "user_sessions")
    )


def test_a_range_end_alone_looks_two_days_back_from_it() -> None:
    r = request("--to", "2026-11-01T10:00", "--run-id", "r1")
    assert (r.start, r.end, r.run_id) == (
        datetime(2026, 10, 30, 10, 0, tzinfo=UTC),
        datetime(2026, 11, 1, 10, 0, tzinfo=UTC),
        "r1",
    )
    r = request("--from", "2026-11-25T09:00:00+02:00")
    assert (r.start, r.end) == (datetime(2026, 11, 25, 7, 0, tzinfo=UTC), NOW)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--from", "2026-11-25T11:00Z", "--to", "2026-11-25T10:00Z"], "is not before"),
        (["--from", "2100-01-01T00:00Z"], "is not before"),  # the default end is now
        (["--table", "ops.batch_runs"], "no data-quality suite for ops.batch_runs"),
        (["--table", "silver.event"], "no data-quality suite for silver.event"),
        (["--run-id", " "], "--run-id is empty"),
    ],
    ids=["reversed", "from-after-now", "no-suite", "unknown", "empty-run-id"],
)
def test_bad_requests_are_refused_before_anything_runs(
    argv: list[str],
    message: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(BadQualityRequest, match=message):
        request(*argv)
    # main() refuses them before loading settings or starting Spark.
    monkeypatch.setattr(jobs.quality, "get_settings", _went_too_far)
    assert main(argv) == Exit.BAD_REQUEST
    assert "nothing written" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv", [["--layer", "gold"], ["--from", "yesterday"], ["--table"]], ids=str
)
def test_unusable_arguments_exit_with_status_2(
    argv: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(jobs.quality, "get_settings", _went_too_far)
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == Exit.BAD_REQUEST


@pytest.mark.parametrize(
    "argv",
    [
        ["--to", "0001-01-02T00:00Z"],  # two days back from it is before year 1
        ["--table", "silver.events", "--from", "2026-11-27T00:00Z", "--to", "9999-12-31T23:59Z"],
    ],
    ids=["to-year-1", "to-year-9999"],
)
def test_times_out_of_range_are_refused_in_one_line(
    argv: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(jobs.quality, "get_settings", _went_too_far)
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == Exit.BAD_REQUEST
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert "argument --to:" in err and "outside the times Tributary handles" in err


def test_every_table_has_a_suite_a_time_column_and_a_registry_entry() -> None:
    # Here, not at the top: Great Expectations takes seconds to import, and every test
    # worker imports every test module.
    from lakehouse.quality.suites import suite_for

    assert set(TIME_COLUMNS) == set(LAYERS["all"])
    bounds = event_time_bounds(request(), load_settings(environ={}))
    for name in LAYERS["all"]:
        table(name)
        assert suite_for(name, bounds).name == name
    assert table("dq.quality_runs").writer == table("dq.quality_quarantine").writer == QUALITY


def test_silver_event_times_may_be_old_but_not_beyond_the_future_tolerance() -> None:
    settings = load_settings(environ={})
    bounds = event_time_bounds(request("--to", "2026-11-25T10:00Z"), settings)
    tolerance = timedelta(seconds=settings.speed.future_tolerance_seconds)
    assert bounds.earliest == EPOCH
    assert bounds.latest == datetime(2026, 11, 25, 10, 0, tzinfo=UTC) + tolerance
