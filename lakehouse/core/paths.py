"""Where things live on disk. Standard library only (the bootstrap imports it)."""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
CONFIG_DIR = REPO_ROOT / "config"

CACHE_ENV = "TRIBUTARY_CACHE"
STATE_ENV = "TRIBUTARY_STATE"


def cache_dir(env: Mapping[str, str] | None = None) -> Path:
    """Downloads and builds shared by every clone on this machine (venv, jars, binaries)."""
    env = os.environ if env is None else env
    return Path(env.get(CACHE_ENV) or Path.home() / ".cache" / "tributary").expanduser()


def dq_dir(env: Mapping[str, str] | None = None) -> Path:
    """What the quality checks and reconciliations publish for people to open (reports,
    Data Docs, replay plans), served by the Tributary view."""
    return state_dir(env) / "dq"


def run_file_name(run_id: str) -> str:
    """A run's id as a file name: the characters a file name cannot hold become '_'."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", run_id)


def state_dir(env: Mapping[str, str] | None = None) -> Path:
    """Service data, logs, pid files, secrets and the local lakehouse."""
    env = os.environ if env is None else env
    return Path(env.get(STATE_ENV) or cache_dir(env) / "state").expanduser()


def speed_layer_stop_file(env: Mapping[str, str] | None = None) -> Path:
    """Created to ask a running speed layer to stop after its current micro-batch. The job
    watches it by default; the supervisor creates it (and must not import the job: pyspark)."""
    return state_dir(env) / "run" / "speed_layer.stop"


def cdc_stop_file(env: Mapping[str, str] | None = None) -> Path:
    """Created to ask a running changelog stream (jobs.cdc) to stop after its current batch."""
    return state_dir(env) / "run" / "cdc.stop"


def enrichment_stop_file(env: Mapping[str, str] | None = None) -> Path:
    """Created to ask a running enrichment stream (jobs.enrich) to stop after its batch."""
    return state_dir(env) / "run" / "enrich.stop"


def commerce_stop_file(env: Mapping[str, str] | None = None) -> Path:
    """Created to ask a running commerce stream (jobs.commerce) to stop after its batch."""
    return state_dir(env) / "run" / "commerce.stop"


def stream_joins_stop_file(env: Mapping[str, str] | None = None) -> Path:
    """Created to ask the running stream joins (jobs.stream_joins) to stop after their
    current batches."""
    return state_dir(env) / "run" / "stream_joins.stop"


def fingerprint(*files: Path, extra: str = "") -> str:
    """A short content hash: cache folders are named by the files that define them."""
    digest = hashlib.sha256(extra.encode())
    for path in files:
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


SPARK_POM = REPO_ROOT / "infra" / "jvm" / "spark" / "pom.xml"
KAFKA_POM = REPO_ROOT / "infra" / "jvm" / "kafka" / "pom.xml"


def spark_jars_dir(env: Mapping[str, str] | None = None) -> Path:
    """Delta, the Kafka connector and S3A jars, resolved by `make setup` from SPARK_POM."""
    return cache_dir(env) / "jars" / f"spark-{fingerprint(SPARK_POM)}"


def kafka_jars_dir(env: Mapping[str, str] | None = None) -> Path:
    """The Kafka broker's jars, resolved by `make setup` from KAFKA_POM."""
    return cache_dir(env) / "jars" / f"kafka-{fingerprint(KAFKA_POM)}"


CONNECT_POM = REPO_ROOT / "infra" / "jvm" / "connect" / "pom.xml"


def connect_jars_dir(env: Mapping[str, str] | None = None) -> Path:
    """Kafka Connect and the Debezium PostgreSQL connector, resolved by `make setup` from
    CONNECT_POM."""
    return cache_dir(env) / "jars" / f"connect-{fingerprint(CONNECT_POM)}"
