"""Object storage plumbing that is not Spark's: buckets. S3-generic (any S3 API server)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from lakehouse.core.config import Settings
from lakehouse.core.secrets import secrets_file

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


# What a server answers to a key it does not know or a secret that does not match.
_CREDENTIAL_CODES = {"AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch"}


@contextmanager
def _explained(settings: Settings) -> Iterator[None]:
    """Turn the client's errors (urllib3's and minio's many types) into one StorageError line."""
    from minio.error import MinioException, S3Error
    from urllib3.exceptions import HTTPError

    endpoint = settings.s3.endpoint
    try:
        yield
    except S3Error as err:
        if err.code in _CREDENTIAL_CODES:
            raise StorageError(
                f"MinIO/S3 at {endpoint} refused the credentials ({err.code}): check the S3 "
                "credentials (TRIBUTARY_S3_ACCESS_KEY / TRIBUTARY_S3_SECRET_KEY, see "
                f"{secrets_file()})"
            ) from None
        raise StorageError(f"MinIO/S3 at {endpoint} refused: {err.code}: {err.message}") from None
    except HTTPError:
        raise StorageError(
            f"MinIO/S3 at {endpoint} is not reachable: start it with `make up`"
        ) from None
    except MinioException as err:  # a server error or an answer that is not S3's
        raise StorageError(f"MinIO/S3 at {endpoint} cannot be used: {err}") from None


def ensure_bucket(settings: Settings, bucket: str | None = None) -> str:
    """Create the lakehouse bucket if it does not exist yet. Idempotent."""
    client = s3_client(settings)
    name = bucket or settings.s3.bucket
    with _explained(settings):
        if not client.bucket_exists(name):
            client.make_bucket(name)
    return name


def check_bucket(settings: Settings, bucket: str | None = None) -> str:
    """Fail unless the lakehouse bucket can be read: for commands that only read, which must
    not create it, and should say so at once instead of leaving Spark's S3A to retry."""
    client = s3_client(settings)
    name = bucket or settings.s3.bucket
    with _explained(settings):
        exists = client.bucket_exists(name)
    if not exists:
        raise StorageError(
            f"bucket {name!r} does not exist at {settings.s3.endpoint}: `make up` creates it"
        )
    return name


def delete_prefix(settings: Settings, prefix: str, bucket: str | None = None) -> int:
    """Delete every object under `prefix` in the bucket; returns how many. For what tests and
    benchmarks leave behind, never for the lakehouse itself."""
    from minio.deleteobjects import DeleteObject

    if not prefix.strip("/"):
        raise ValueError("a prefix is needed: emptying the whole bucket is never what is meant")
    client = s3_client(settings)
    name = bucket or settings.s3.bucket
    with _explained(settings):
        names = [
            o.object_name
            for o in client.list_objects(name, prefix=prefix, recursive=True)
            if o.object_name
        ]
        errors = list(client.remove_objects(name, (DeleteObject(n) for n in names)))
    if errors:
        raise StorageError(f"{len(errors)} objects under {prefix} not deleted: {errors[0]}")
    return len(names)


def stored_bytes(settings: Settings, folder: str) -> int | None:
    """The bytes stored under a lakehouse folder (a local path or s3a://bucket/prefix), every
    file counted, or None when nothing is there."""
    import os

    if not folder.startswith("s3a://"):
        path = folder.removeprefix("file://")
        if not os.path.isdir(path):
            return None
        return sum(
            os.path.getsize(os.path.join(root, name))
            for root, _, names in os.walk(path)
            for name in names
        )
    bucket, _, prefix = folder.removeprefix("s3a://").partition("/")
    with _explained(settings):
        sizes = [
            o.size or 0
            for o in s3_client(settings).list_objects(
                bucket, prefix=prefix.rstrip("/") + "/", recursive=True
            )
        ]
    return sum(sizes) if sizes else None
