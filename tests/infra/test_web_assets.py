"""The Data Docs' web assets (infra/web_assets.py) without the network: tarballs built here,
served by a stand-in for the download. A complete folder is never fetched again; a tarball
that is not the pinned one is refused; an unreachable registry says what to do."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from infra.bootstrap import SetupError
from infra.web_assets import download, install, integrity, tarball_url
from lakehouse.quality.offline_assets import Package
from tests.ports import closed_port

FILES = {"dist/a.min.js": b"window.a = 1;\n", "dist/css/a.min.css": b"a { color: red }\n"}


def tarball(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in {**files, "README.md": b"not kept\n"}.items():
            member = tarfile.TarInfo(f"package/{name}")
            member.size = len(data)
            tar.addfile(member, io.BytesIO(data))
    return buffer.getvalue()


class Registry:
    """Serves one tarball, whatever the URL, and counts the downloads."""

    def __init__(self, body: bytes) -> None:
        self.body, self.urls = body, list[str]()

    def __call__(self, url: str) -> bytes:
        self.urls.append(url)
        return self.body


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TRIBUTARY_CACHE", str(tmp_path / "cache"))  # the build's lock goes here
    monkeypatch.delenv("NPM_CONFIG_REGISTRY", raising=False)
    return tmp_path / "cache"


def pinned(body: bytes, files: tuple[str, ...] = tuple(FILES)) -> Package:
    return Package("@scope/lib", "1.2.3", integrity(body), files)


def test_the_pinned_files_are_kept_and_a_second_run_downloads_nothing(tmp_path: Path) -> None:
    body = tarball(FILES)
    registry, folder = Registry(body), tmp_path / "web" / "pins"
    assert install(folder, (pinned(body),), registry) == folder
    assert registry.urls == ["https://registry.npmjs.org/@scope/lib/-/lib-1.2.3.tgz"]
    kept = {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}
    assert kept == {".complete", *(f"@scope/lib@1.2.3/{name}" for name in FILES)}
    assert (folder / "@scope/lib@1.2.3/dist/a.min.js").read_bytes() == FILES["dist/a.min.js"]

    install(folder, (pinned(body),), registry)
    assert len(registry.urls) == 1, "a complete folder is used as it is"


def test_a_tarball_that_is_not_the_pinned_one_is_refused(tmp_path: Path) -> None:
    tampered = tarball({**FILES, "dist/a.min.js": b"steal(document.cookie);\n"})
    folder = tmp_path / "web" / "pins"
    with pytest.raises(SetupError, match=r"@scope/lib@1\.2\.3: the tarball's sha512 is .* refused"):
        install(folder, (pinned(tarball(FILES)),), Registry(tampered))
    assert not folder.exists(), "nothing refused is left where the view would serve it"


def test_a_pinned_file_the_tarball_lacks_is_named(tmp_path: Path) -> None:
    body = tarball(FILES)
    with pytest.raises(SetupError, match=r"@scope/lib@1\.2\.3 has no dist/b\.js"):
        install(tmp_path / "web", (pinned(body, ("dist/b.js",)),), Registry(body))


def test_an_unreachable_registry_says_what_to_do(monkeypatch: pytest.MonkeyPatch) -> None:
    mirror = f"http://127.0.0.1:{closed_port()}"
    monkeypatch.setenv("NPM_CONFIG_REGISTRY", mirror + "/")
    url = tarball_url(pinned(b""), mirror)
    with pytest.raises(SetupError) as raised:
        download(url)
    message = str(raised.value)
    assert url in message and "refused" in message, message
    assert "NPM_CONFIG_REGISTRY" in message and "`make setup` again" in message, message
