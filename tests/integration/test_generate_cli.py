"""`python -m jobs.generate` (run in the test's process) against the real broker: what lands
in the topic is what the ledger says, and bad arguments send nothing."""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lakehouse.core.config import Settings
from lakehouse.generator.clickstream import KINDS
from lakehouse.generator.ledger import read_ledger
from tests.conftest import new_topic
from tests.jobs_in_process import Ran, RunJob

Generate = Callable[..., Ran]


@pytest.fixture
def run_generate(
    run_job_here: RunJob, minio_settings: Settings, kafka_up: str, tmp_path: Path
) -> Generate:
    """`python -m jobs.generate ARGS` with the tests' broker, and a private state folder so
    default ledgers land in tmp_path."""

    def run(*args: str) -> Ran:
        return run_job_here(
            "jobs.generate",
            *args,
            TRIBUTARY_PROFILE=minio_settings.profile,
            TRIBUTARY__KAFKA__BOOTSTRAP_SERVERS=kafka_up,
            TRIBUTARY_STATE=str(tmp_path / "state"),
        )

    return run


@pytest.fixture
def gen_topic() -> str:
    return new_topic("gen")


def read_topic(servers: str, topic: str, expected: int, within: float = 60.0) -> list[Any]:
    """Every record of the topic, waiting (boundedly) until `expected` have been read."""
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=servers,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=2_000,
    )
    received: list[Any] = []
    deadline = time.monotonic() + within
    try:
        while len(received) < expected and time.monotonic() < deadline:
            received.extend(consumer)
        received.extend(consumer)  # anything beyond `expected` would be a bug: look for it
    finally:
        consumer.close()
    return received


def topic_exists(servers: str, topic: str) -> bool:
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=servers)
    try:
        return topic in admin.list_topics()
    finally:
        admin.close()


def summary_counts(stdout: str, label: str) -> dict[str, int]:
    line = next(x for x in stdout.splitlines() if x.strip().startswith(f"{label}:"))
    return {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", line)}


def test_generated_topic_matches_the_ledger(
    run_generate: Generate, kafka_up: str, gen_topic: str, tmp_path: Path
) -> None:
    result = run_generate(
        *("--count", "3000", "--seed", "7", "--anomalies", "all", "--topic", gen_topic),
    )
    assert result.returncode == 0, result.stderr
    assert "==> sent 3000/3000 records" in result.stdout

    printed = re.search(r"ledger:\s+(\S+)", result.stdout)
    assert printed, result.stdout
    ledger_path = Path(printed.group(1))
    assert ledger_path.parent == tmp_path / "state" / "ledgers"
    assert ledger_path.name.endswith("-seed7.jsonl")
    ledger = read_ledger(ledger_path)
    assert [e["seq"] for e in ledger] == list(range(3000))

    kinds = Counter(e["kind"] for e in ledger)
    assert summary_counts(result.stdout, "kinds") == {k: n for k, n in kinds.items() if n}
    assert set(kinds) == set(KINDS), "with --anomalies all, every kind is sent"
    fates = Counter(e["expected"] for e in ledger)
    assert summary_counts(result.stdout, "expected") == dict(fates)

    records = read_topic(kafka_up, gen_topic, expected=len(ledger))
    assert len(records) == len(ledger)
    by_position = {(r.partition, r.offset): r for r in records}
    for entry in ledger:
        record = by_position[(entry["partition"], entry["offset"])]
        assert record.key.decode() == entry["key"]
        assert len(record.value) == entry["size"]
        assert record.timestamp == entry["timestamp_ms"]


@pytest.mark.parametrize(
    "bad",
    [
        ["--count", "-5"],
        ["--count", "10", "--late", "1.5"],
        ["--count", "10", "--start", "yesterday-ish"],
        ["--count", "10", "--anomalies", "all", "--duplicate", "0.4"],
        ["--count", "10000000", "--rate", "10"],  # event times would run days ahead
        ["--count", "10", "--start", "9999-12-31T23:00-05:00"],  # after year 9999 in UTC
        ["--count", "200", "--start", "0001-01-01T00:00Z", "--late", "0.3"],
        ["--count", "10", "--late-min", "infm"],
        ["--count", "10", "--late-max", "1e20d"],
        ["--count", "10", "--rate", "inf"],
        ["--count", "10", "--late", "nan"],
    ],
    ids=[
        "negative-count",
        "fraction-above-1",
        "bad-start",
        "fractions-sum",
        "clock-ahead",
        "start-past-9999",
        "start-year-1",
        "infinite-duration",
        "huge-duration",
        "infinite-rate",
        "nan-fraction",
    ],
)
def test_bad_arguments_exit_2_and_send_nothing(
    run_generate: Generate, kafka_up: str, gen_topic: str, tmp_path: Path, bad: list[str]
) -> None:
    ledger = tmp_path / "ledger.jsonl"
    result = run_generate(*bad, "--topic", gen_topic, "--ledger", str(ledger))
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "error:" in result.stderr
    assert result.stdout == ""
    assert not ledger.exists()
    assert not topic_exists(kafka_up, gen_topic)


def test_a_rate_too_slow_for_the_times_handled_is_refused_in_the_users_words(
    run_generate: Generate, kafka_up: str, gen_topic: str, tmp_path: Path
) -> None:
    result = run_generate("--count", "10", "--rate", "1e-300", "--topic", gen_topic)
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "1e-300 events/s" in result.stderr and result.stdout == ""
    assert not re.search(r"\d{20}", result.stderr), "no number the user did not write"
    assert not topic_exists(kafka_up, gen_topic)


@pytest.mark.parametrize("where", ["folder", "under-a-file"])
def test_a_ledger_that_cannot_be_written_sends_nothing(
    run_generate: Generate, kafka_up: str, gen_topic: str, tmp_path: Path, where: str
) -> None:
    (tmp_path / "file").write_text("")
    ledger = tmp_path if where == "folder" else tmp_path / "file" / "x.jsonl"
    result = run_generate("--count", "10", "--topic", gen_topic, "--ledger", str(ledger))
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "the ledger" in result.stderr and "Traceback" not in result.stderr
    assert not topic_exists(kafka_up, gen_topic), "the topic was created all the same"


@pytest.mark.parametrize("name", [".", ".."])
def test_topic_names_kafka_refuses_are_bad_arguments(run_generate: Generate, name: str) -> None:
    result = run_generate("--count", "10", "--topic", name)
    assert result.returncode == 2
    assert "is not a valid Kafka topic name" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
