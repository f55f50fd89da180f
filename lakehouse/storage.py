"""Object storage plumbing that is not Spark's: buckets. S3-generic (any S3 API server)."""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import urlparse

from lakehouse.config import Settings

if TYPE_CHECKING:
    from minio import Minio


class StorageError(Exception):
    """Object storage cannot be used; the message says why."""


def s3_client(settings: Settings) -> Minio:
    from minio import Minio

    s3 = settings.s3
    if s3.access_key is None or s3.secret_key is None:
        raise StorageError(
            "no S3 credentials: run `make setup`, or set "
            "TRIBUTARY_S3_ACCESS_KEY and TRIBUTARY_S3_SECRET_KEY"
        )
    url = urlparse(s3.endpoint)
    return Minio(
        url.netloc,
        access_key=s3.access_key.get_secret_value(),
        secret_key=s3.secret_key.get_secret_value(),
        secure=url.scheme == "https",
        region=s3.region,
    )


def ensure_bucket(settings: Settings, bucket: str | None = None) -> str:
    """Create the lakehouse bucket if it does not exist yet. Idempotent."""
    client = s3_client(settings)
    name = bucket or settings.s3.bucket
    if not client.bucket_exists(name):
        client.make_bucket(name)
    return name


def delete_prefix(settings: Settings, prefix: str, bucket: str | None = None) -> int:
    """Delete every object under `prefix` in the bucket; returns how many. For what tests and
    benchmarks leave behind, never for the lakehouse itself."""
    from minio.deleteobjects import DeleteObject

    if not prefix.strip("/"):
        raise ValueError("a prefix is needed: emptying the whole bucket is never what is meant")
    client = s3_client(settings)
    name = bucket or settings.s3.bucket
    names = [
        o.object_name
        for o in client.list_objects(name, prefix=prefix, recursive=True)
        if o.object_name
    ]
    errors = list(client.remove_objects(name, (DeleteObject(n) for n in names)))
    if errors:
        raise StorageError(f"{len(errors)} objects under {prefix} not deleted: {errors[0]}")
    return len(names)
