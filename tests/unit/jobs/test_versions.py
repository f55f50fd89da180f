"""What `python -m jobs.versions` says serving reads after a promotion: the active version is
served only in kappa mode; in lambda mode serving reads batch + speed."""

from __future__ import annotations

from jobs.versions import outcome_line


def test_in_kappa_mode_serving_reads_the_active_version() -> None:
    assert outcome_line("promoted v1", "v1", "kappa") == "==> promoted v1; serving now reads v1"


def test_in_lambda_mode_the_active_version_waits_for_kappa() -> None:
    line = outcome_line("promoted v1", "v1", "lambda")
    assert line == (
        "==> promoted v1; the active version is now v1, which serving reads once the mode is "
        "kappa (TRIBUTARY__MODE=kappa); in lambda mode, as now, serving reads batch + speed"
    )
    assert "serving now reads v1" not in line


def test_the_listing_and_the_refusals_never_start_spark(
    spark, local_settings, run_job_here, monkeypatch, tmp_path
) -> None:
    """They read the versions and the pointer with delta-rs: an answer in about a second, not
    the 15-20 s a SparkSession takes to start. The tables are written by Spark, as the jobs
    write them."""
    from lakehouse.core.paths import STATE_ENV
    from lakehouse.replay.versions import record_version_event, switch_pointer

    record_version_event(spark, local_settings, "v1", "planned")
    record_version_event(spark, local_settings, "v1", "caught_up", records=10, rate=5.0)
    record_version_event(spark, local_settings, "v2", "planned")
    switch_pointer(spark, local_settings, "promote", "v1", "v1")

    def no_spark(*_: object) -> None:
        raise AssertionError("the command started Spark")

    monkeypatch.setattr("jobs.versions.get_spark", no_spark)
    env = {
        "TRIBUTARY_PROFILE": "local",
        STATE_ENV: str(tmp_path / "state"),
        "TRIBUTARY__STORAGE__ROOT": local_settings.storage.root,
        "TRIBUTARY__STORAGE__CHECKPOINTS": local_settings.storage.checkpoints,
    }
    listed = run_job_here("jobs.versions", "list", **env)
    assert listed.returncode == 0, listed.stderr
    rows = {
        line.split()[1 if line.startswith("*") else 0]: line
        for line in listed.stdout.splitlines()[1:3]
    }
    assert rows["v1"].startswith("* v1") and " caught_up " in rows["v1"], listed.stdout
    assert rows["v2"].startswith("  v2") and " running " in rows["v2"], listed.stdout
    assert "active: v1 (* above)" in listed.stdout

    refused = {
        ("promote", "v9"): "no version 'v9'; versions: v1, v2",
        ("promote", "v2"): "v2 has not caught up (status running)",
        ("promote", "v1"): "v1 is already the active version",
        ("remove", "v1"): "v1 is the active version",
    }
    for args, reason in refused.items():
        ran = run_job_here("jobs.versions", *args, **env)
        assert (ran.returncode, reason in ran.stderr) == (2, True), (args, ran.stderr)
