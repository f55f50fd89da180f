"""The Data Docs' stylesheets, scripts and fonts, for machines without internet.

    python3 infra/web_assets.py      (`make setup` runs it: python3 infra/bootstrap.py web)

Great Expectations' pages load them from public CDNs. The same files come here from the npm
registry, pinned in lakehouse/quality/offline_assets.py (exact versions, each tarball's sha512,
the files kept), into its assets_dir(): <cache>/web/<hash of the pins>/, built in a temporary
folder and renamed, so a second run or a second clone downloads nothing. A tarball whose sha512
is not the pinned one is refused. NPM_CONFIG_REGISTRY points at a mirror (npm's own variable).
Standard library only: it runs before the venv exists.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import sys
import tarfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from infra.bootstrap import SetupError, build_into, cache_lock, complete, info, step
from lakehouse.quality.offline_assets import PACKAGES, Package, assets_dir

REGISTRY = "https://registry.npmjs.org"
TIMEOUT = 60  # seconds without a byte before a download is given up

Fetch = Callable[[str], bytes]


def registry() -> str:
    return (os.environ.get("NPM_CONFIG_REGISTRY") or REGISTRY).rstrip("/")


def tarball_url(package: Package, base: str) -> str:
    """The registry's standard tarball path: <registry>/@scope/name/-/name-1.2.3.tgz."""
    return f"{base}/{package.name}/-/{package.name.split('/')[-1]}-{package.version}.tgz"


def download(url: str) -> bytes:
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT) as response:
            return bytes(response.read())
    except (urllib.error.URLError, OSError) as err:
        reason = getattr(err, "reason", None) or err
        raise SetupError(
            f"cannot download {url} ({reason}). The Data Docs' CSS and JS come from the npm "
            "registry: check that this machine reaches it (an HTTPS proxy is read from "
            "HTTPS_PROXY), or set NPM_CONFIG_REGISTRY to a mirror, then run `make setup` again"
        ) from None


def integrity(tarball: bytes) -> str:
    """npm's dist.integrity of a tarball."""
    return "sha512-" + base64.b64encode(hashlib.sha512(tarball).digest()).decode()


def unpack(package: Package, tarball: bytes, into: Path) -> int:
    """Check the tarball against its pin, then write the package's kept files under
    into/<name>@<version>/; their total size. Only names from the pin list are written, so a
    tarball's own paths never choose where a file lands."""
    got = integrity(tarball)
    if got != package.integrity:
        raise SetupError(
            f"{package.folder}: the tarball's sha512 is {got}, the pin says {package.integrity}; "
            "refused (the registry or a proxy served other bytes). If the pin was changed on "
            "purpose, pin the registry's dist.integrity in lakehouse/quality/offline_assets.py"
        )
    size = 0
    with tarfile.open(fileobj=io.BytesIO(tarball), mode="r:gz") as tar:
        # npm tarballs hold one top folder, usually package/.
        members = {m.name.split("/", 1)[-1]: m for m in tar.getmembers() if m.isfile()}
        for file in package.files:
            member = members.get(file)
            source = tar.extractfile(member) if member else None
            if source is None:
                raise SetupError(f"{package.folder} has no {file}; fix its files in the pin list")
            data = source.read()
            target = into / package.folder / file
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            size += len(data)
    return size


def fetch_all(into: Path, packages: Iterable[Package], fetch: Fetch) -> None:
    base = registry()
    for package in packages:
        started = time.monotonic()
        tarball = fetch(tarball_url(package, base))
        kept = unpack(package, tarball, into)
        files = f"{len(package.files)} file" + ("s" if len(package.files) > 1 else "")
        info(
            f"{package.folder}: {len(tarball) / 1024:.0f} KiB tarball, {files} kept "
            f"({kept / 1024:.0f} KiB) in {time.monotonic() - started:.1f}s"
        )


def install(
    folder: Path | None = None,
    packages: tuple[Package, ...] = PACKAGES,
    fetch: Fetch = download,
) -> Path:
    folder = folder or assets_dir()
    step(f"Data Docs web assets: {len(packages)} npm packages ({folder})")
    with cache_lock("web-assets"):
        if complete(folder):
            info("cached")
            return folder
        started = time.monotonic()
        info(f"downloading from {registry()}")
        build_into(folder, lambda tmp: fetch_all(tmp, packages, fetch))
        info(f"web assets: done in {time.monotonic() - started:.0f}s")
    return folder


def main() -> int:
    try:
        install()
    except SetupError as err:
        print(f"setup failed: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
