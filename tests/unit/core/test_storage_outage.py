"""Object storage going away during a job: the failure in one line, the outage said while it
lasts (lakehouse/core/storage_outage.py)."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest

from lakehouse.core.config import Settings
from lakehouse.core.storage_outage import lost_storage, storage_watched
from tests.conftest import _settings

# As a Spark call raises it when S3A gave up (abridged from a real run: MinIO stopped).
S3A_GAVE_UP = (
    "An error occurred while calling o637.persist.\n: java.net.ConnectException: listObjects() "
    "on s3a://tributary/lakehouse/batch/redeliveries/_delta_log: software.amazon.awssdk.core."
    "exception.SdkClientException: Unable to execute HTTP request: Connect to 127.0.0.1:9010 "
    "[/127.0.0.1] failed: Connection refused:    software.amazon.\n\tat org.apache.hadoop..."
)


# As delta-rs raises it (an OSError; abridged, its arrows and colours left out).
DELTA_RS_GAVE_UP = (
    "Kernel error -> Generic S3 error\n  Error performing GET http://127.0.0.1:9010/tributary/x/"
    "_delta_log/_last_checkpoint in 2.07s, after 10 retries\n   HTTP error\n    error sending "
    "request\n     client error (Connect)\n      tcp connect error\n       Connection refused "
    "(os error 111)\n"
)


@pytest.mark.parametrize(
    ("failure", "detail"),
    [
        (S3A_GAVE_UP, "(Connect to 127.0.0.1:9010 [/127.0.0.1] failed: Connection refused)"),
        (DELTA_RS_GAVE_UP, "(tcp connect error)"),
    ],
)
def test_a_connection_refused_by_storage_is_one_line_saying_what_to_do(
    failure: str, detail: str
) -> None:
    said = lost_storage(RuntimeError(failure), _on_s3(9010))
    assert said is not None
    endpoint = "object storage at http://127.0.0.1:9010"
    assert said.startswith(f"{endpoint} stopped answering during the run {detail}; ")
    assert "last committed version" in said and "run it again" in said
    assert "\n" not in said


@pytest.mark.parametrize(
    "failure",
    [
        "org.apache.spark.sql.AnalysisException: [TABLE_OR_VIEW_NOT_FOUND]",
        "java.lang.OutOfMemoryError: Java heap space",
        "AccessDenied: Access Denied (Service: S3, Status Code: 403)",
    ],
)
def test_any_other_failure_is_not_taken_for_lost_storage(failure: str) -> None:
    assert lost_storage(RuntimeError(failure), _on_s3(9010)) is None


def _listening(port: int = 0) -> socket.socket:
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", port))
    server.listen()
    return server


def _on_s3(port: int) -> Settings:
    return _settings(
        "minio", storage__root="s3a://tributary/lakehouse", s3__endpoint=f"http://127.0.0.1:{port}"
    )


def test_an_outage_is_said_when_it_starts_and_when_it_ends(
    capsys: pytest.CaptureFixture[str],
) -> None:
    server = _listening()
    port = server.getsockname()[1]
    with storage_watched(_on_s3(port), "batch layer", every=0.1):
        time.sleep(0.3)
        server.close()
        time.sleep(0.5)
        server = _listening(port)
        time.sleep(0.5)
    server.close()
    said = capsys.readouterr().err.splitlines()
    assert len(said) == 2, said
    assert "is not answering" in said[0] and "answers again" in said[1], said
    assert said[0].startswith(f"batch layer: object storage at http://127.0.0.1:{port} ")


def test_storage_that_answers_and_local_disk_are_not_watched_aloud(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    server = _listening()
    with storage_watched(_on_s3(server.getsockname()[1]), "batch layer", every=0.1):
        time.sleep(0.3)
    server.close()
    local = _settings("local", storage__root=str(tmp_path))
    with storage_watched(local, "batch layer", every=0.1):
        time.sleep(0.3)
    assert capsys.readouterr().err == ""
