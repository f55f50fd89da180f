"""The stream jobs' (jobs.speed_layer, jobs.cdc) --stop-file: each deletes the file at start,
so only a stop file (missing or empty, as `touch` and the supervisor make it) is taken, and
only once the job can run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from jobs.contract import Exit
from tests.jobs_in_process import Ran, RunJob

REPO = Path(__file__).parents[3]
NO_BROKER = "127.0.0.1:1"  # nothing listens there: the job cannot start


# Each stream job and the name its messages give it.
STREAM_JOBS = {"jobs.speed_layer": "speed layer", "jobs.cdc": "changelog stream"}


def stream_job(run_job_here: RunJob, job: str, *args: str) -> Ran:
    return run_job_here(
        job,
        *args,
        TRIBUTARY__KAFKA__BOOTSTRAP_SERVERS=NO_BROKER,
        # A closed port refuses at once: no need to try for the default ten seconds.
        TRIBUTARY__KAFKA__CONNECT_TIMEOUT_SECONDS="1",
    )


@pytest.mark.parametrize("job", STREAM_JOBS)
@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("folder", "is a folder, not a stop file"),
        ("precious.txt/x", "precious.txt is not an existing folder"),
        ("missing/x", "missing is not an existing folder"),
        ("precious.txt", "is a file with contents, not a stop file: it would be deleted"),
    ],
)
def test_a_path_that_is_not_a_stop_file_is_refused_and_left_alone(
    tmp_path: Path, job: str, name: str, message: str, run_job_here: RunJob
) -> None:
    (tmp_path / "folder").mkdir()
    precious = tmp_path / "precious.txt"
    precious.write_text("keep me\n")
    run = stream_job(run_job_here, job, "--stop-file", str(tmp_path / name))
    assert run.returncode == Exit.BAD_REQUEST
    assert message in run.stderr and "Traceback" not in run.stderr
    assert precious.read_text() == "keep me\n"


@pytest.mark.parametrize("job", STREAM_JOBS)
def test_a_pending_stop_request_survives_a_run_that_cannot_start(
    tmp_path: Path, job: str, run_job_here: RunJob
) -> None:
    stop = tmp_path / "stream.stop"
    stop.touch()
    run = stream_job(run_job_here, job, "--stop-file", str(stop))
    assert run.returncode == Exit.CANNOT_RUN
    title = STREAM_JOBS[job]
    assert run.stderr == f"{title}: no Kafka broker at {NO_BROKER}: start it with `make up`\n"
    assert stop.exists()


def test_once_spark_has_started_the_signals_still_stop_gracefully(tmp_path: Path) -> None:
    """Starting the SparkContext installs pyspark's SIGINT handler (Ctrl-C crashed inside a
    py4j call), and a SIGTERM to the process group reached the JVM. In a process of its own:
    here a session may be running already, and it would be reused without either."""
    script = (
        "import os, signal, sys, time\n"
        "from pathlib import Path\n"
        "from lakehouse.speed.stream import StopRequest, start_spark\n"
        "from lakehouse.core.config import get_settings\n"
        "stop = StopRequest(Path(sys.argv[1]))\n"
        "spark = start_spark(get_settings(), stop)\n"
        "print('SIGINT ours:', signal.getsignal(signal.SIGINT) == stop._on_signal)\n"
        "print('SIGTERM ours:', signal.getsignal(signal.SIGTERM) == stop._on_signal)\n"
        "os.kill(spark.sparkContext._gateway.proc.pid, signal.SIGTERM)\n"
        "time.sleep(2)\n"
        "print('JVM after SIGTERM:', spark.range(3).count())\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "speed_layer.stop")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.splitlines() == [
        "SIGINT ours: True",
        "SIGTERM ours: True",
        "JVM after SIGTERM: 3",
    ], run.stdout
