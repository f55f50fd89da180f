"""The demo's closing hints: commands a user copies must read the demo's own lakehouse."""

from __future__ import annotations

import os

import pytest

from jobs.demo import print_where_to_look
from lakehouse.core.config import load_settings


@pytest.mark.parametrize(
    ("profile", "prefix"), [("local", ""), ("minio", "TRIBUTARY_PROFILE=minio ")]
)
def test_the_query_hints_name_the_profile_the_demo_ran_with(
    capsys: pytest.CaptureFixture[str], profile: str, prefix: str
) -> None:
    env = {**os.environ, "TRIBUTARY_S3_ACCESS_KEY": "k", "TRIBUTARY_S3_SECRET_KEY": "s"}
    env.pop("TRIBUTARY_PROFILE", None)
    print_where_to_look(load_settings(profile, env))
    out = capsys.readouterr().out
    assert f"  Query        {prefix}.venv/bin/tributary query event_counts_1m" in out
    assert f"{prefix}make batch ARGS=" in out
    assert "  Joins        docs/joins.md; the enrichment, commerce and stream_joins DAGs" in out


def test_an_hour_an_earlier_demo_recomputed_is_said_so_and_still_served(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from datetime import UTC, datetime

    from jobs.demo import print_seam
    from lakehouse.batch.recompute import Interval
    from lakehouse.ops.demo import SeamReport

    hour = Interval(datetime(2026, 11, 29, 12, tzinfo=UTC), datetime(2026, 11, 29, 13, tzinfo=UTC))
    reason = f"{hour} unchanged since run demo:1 (bronze unchanged): nothing recomputed"
    print_seam(SeamReport(hour, None, reason, hour.end, [("batch", 60), ("speed", 4)]))
    printed = capsys.readouterr().out
    assert f"==> batch layer: {reason}\n" in printed
    assert "recomputed from bronze" not in printed
    assert "per source (batch up to 13:00, speed after)" in printed
    assert "batch     60 windows" in printed
