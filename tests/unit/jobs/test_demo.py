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
