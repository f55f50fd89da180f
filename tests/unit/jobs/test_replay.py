"""`python -m jobs.replay` when a service it needs is down: one line saying what to start,
exit status 1 (cannot run), no traceback. The services are real closed ports, not mocks."""

from __future__ import annotations

import os

import pytest

from jobs.contract import Exit
from lakehouse.core.config import load_settings
from lakehouse.replay.plan import measured_rate
from lakehouse.replay.run import served_line
from tests.jobs_in_process import RunJob
from tests.ports import closed_port


@pytest.mark.parametrize(
    "profile",
    [
        "local",
        # MinIO down too: the measured rate (for the estimate only) must not stop the plan.
        "minio",
    ],
)
def test_a_dry_run_without_kafka_says_to_start_it(profile: str, run_job_here: RunJob) -> None:
    says_kafka_is_down(
        run_job_here,
        ["--dry-run"],
        TRIBUTARY_PROFILE=profile,
        TRIBUTARY__S3__ENDPOINT=f"http://127.0.0.1:{closed_port()}",
    )


def says_kafka_is_down(run_job_here: RunJob, args: list[str], **env: str) -> None:
    """`python -m jobs.replay *args` with no broker: one line saying to start it, exit 1."""
    kafka = f"127.0.0.1:{closed_port()}"
    ran = run_job_here(
        "jobs.replay",
        *args,
        TRIBUTARY__KAFKA__BOOTSTRAP_SERVERS=kafka,
        # A closed port refuses at once: no need to try for the default ten seconds.
        TRIBUTARY__KAFKA__CONNECT_TIMEOUT_SECONDS="1",
        **env,
    )
    assert ran.returncode == Exit.CANNOT_RUN, ran.stderr
    assert ran.stderr.strip().splitlines() == [
        f"replay: no Kafka broker at {kafka}: start it with `make up`"
    ], ran.stderr


def test_without_storage_the_estimate_goes_on_without_a_measured_rate() -> None:
    endpoint = f"http://127.0.0.1:{closed_port()}"
    settings = load_settings(
        profile="minio", environ={**os.environ, "TRIBUTARY__S3__ENDPOINT": endpoint}
    )
    assert settings.s3.access_key is not None, "the S3 read itself must be what fails"
    assert measured_rate(settings) is None


@pytest.mark.parametrize("continuation", ["--scheduled", "--extend=v1"])
def test_a_continuation_checks_kafka_before_it_starts_spark(
    continuation: str, run_job_here: RunJob
) -> None:
    """Its plan needs Spark (it reads the versions table), so Kafka is checked first: with the
    Spark master down too, the Kafka line shows that Spark was never started."""
    says_kafka_is_down(
        run_job_here,
        [continuation, "--dry-run"],
        TRIBUTARY_PROFILE="local",
        TRIBUTARY__SPARK__MASTER=f"spark://127.0.0.1:{closed_port()}",
    )


def test_an_extension_served_says_what_serving_reads_in_each_mode() -> None:
    assert served_line("v1", "kappa").endswith("serving reads what this run added now")
    lam = served_line("v1", "lambda")
    assert "added now" not in lam and "in lambda mode, as now, it reads batch + speed" in lam
