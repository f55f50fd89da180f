"""Delete what the benchmarks leave behind: their Kafka topics (bench-*, kept forever like
every topic), their local lakehouses under /tmp/tributary-bench and their prefix in the
bucket. The figures in bench/results/ stay. Run with Kafka and MinIO up (`make up`)."""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from lakehouse.core.config import load_settings
from lakehouse.core.kafka_io import KafkaUnavailableError, delete_topics
from lakehouse.core.processes import http_ok
from lakehouse.core.storage import delete_prefix

LOCAL = Path("/tmp/tributary-bench")
TOPIC_PREFIX = "bench-"
BUCKET_PREFIX = "bench/"


def main() -> int:
    argparse.ArgumentParser(prog="python -m bench.clean", description=__doc__).parse_args()
    settings = load_settings("minio")
    failed = False
    try:
        topics = delete_topics(settings, TOPIC_PREFIX)
        print(f"deleted {len(topics)} Kafka topics named {TOPIC_PREFIX}*")
    except KafkaUnavailableError as e:
        print(f"Kafka topics left: {e}", file=sys.stderr)
        failed = True
    if LOCAL.exists():
        shutil.rmtree(LOCAL)
        print(f"deleted {LOCAL}")
    if http_ok(f"{settings.s3.endpoint}/minio/health/live"):
        deleted = delete_prefix(settings, BUCKET_PREFIX)
        print(f"deleted {deleted} objects under s3://{settings.s3.bucket}/{BUCKET_PREFIX}")
    else:
        print(f"{BUCKET_PREFIX} left in the bucket: S3 is not up (`make up`)", file=sys.stderr)
        failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
