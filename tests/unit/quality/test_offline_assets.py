"""Data Docs offline (lakehouse.quality.offline_assets): every CDN URL Great Expectations' pages
load is rewritten to a local file, and `make setup` has downloaded each of those files.

GX's own templates and stylesheets are read from the installed package, without importing it:
they are where every URL of a rendered page comes from, for every kind of page."""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import re
from pathlib import Path

from lakehouse.quality.offline_assets import (
    BLANK_IMAGE,
    CDN,
    PACKAGES,
    assets_dir,
    pins_hash,
    rewrite,
)

PREFIX = "/tributary/assets"
SETUP = "run `make setup` (its web step downloads them from the npm registry)"
URL = re.compile(r"https?://[^\s\"'<>)]+")
LINK = re.compile(r"<a\s[^>]*>", re.IGNORECASE)  # a link a person follows loads nothing
SCRIPT_SRI = re.compile(r'<script src="(https://[^"]+)" integrity="(sha384-[^"]+)"')
CSS_URL = re.compile(r"url\(\s*[\"']?([^\"')]+)")


def gx_sources() -> dict[str, str]:
    """GX's page templates and stylesheets by name; markdown pages (plain text) left out."""
    spec = importlib.util.find_spec("great_expectations")
    assert spec is not None and spec.origin is not None, "great_expectations is not installed"
    view = Path(spec.origin).parent / "render" / "view"
    files = [*view.glob("templates/**/*.j2"), *view.glob("static/**/*.css")]
    assert files, f"no templates under {view}"
    return {f.name: f.read_text() for f in files if not f.name.startswith("markdown_")}


def page(*urls: str) -> str:
    scripts = "".join(f'<script src="{u}"></script>\n' for u in urls if not u.endswith(".css"))
    sheets = "".join(f'<link rel="stylesheet" href="{u}"/>\n' for u in urls if u.endswith(".css"))
    return f"<html><head>{sheets}{scripts}</head><body></body></html>"


def downloaded() -> Path:
    folder = assets_dir()
    assert (folder / ".complete").is_file(), (
        f"the Data Docs' web assets are not in {folder}: {SETUP}"
    )
    return folder


def test_every_cdn_url_becomes_its_local_file_under_the_prefix() -> None:
    rewritten = rewrite(page(*CDN), PREFIX + "/")
    for url, local in CDN.items():
        assert url not in rewritten, url
        assert f'"{PREFIX}/{local}"' in rewritten, local
    assert URL.findall(rewritten) == []


def test_a_longer_url_that_starts_like_a_cdn_url_is_left_alone() -> None:
    html = page("https://cdn.jsdelivr.net/npm/vega@5.1.0/build/vega.js")
    assert rewrite(html, PREFIX) == html


def test_gx_logo_becomes_a_blank_image_and_links_stay() -> None:
    s3 = "https://great-expectations-web-assets.s3.us-east-2.amazonaws.com"
    html = (
        f'<a href="https://greatexpectations.io"><img src="{s3}/logo-long.png?d=20261129T0919Z"'
        f" alt=\"GX\"/></a><style>a {{ background: url('{s3}/full_logo_dark.png') }}</style>"
    )
    rewritten = rewrite(html, PREFIX)
    assert f'src="{BLANK_IMAGE}"' in rewritten
    assert f"url('{BLANK_IMAGE}')" in rewritten
    assert URL.findall(rewritten) == ["https://greatexpectations.io"]


def test_the_mapping_covers_every_url_gx_pages_load_and_nothing_more() -> None:
    sources = gx_sources()
    left = {}
    for name, text in sources.items():
        if found := URL.findall(LINK.sub("", rewrite(text, PREFIX))):
            left[name] = found
    assert left == {}, f"GX pages would still load these from the internet: {left}"
    named = {url for text in sources.values() for url in URL.findall(text)}
    assert set(CDN) <= named, (
        f"GX's pages no longer load {sorted(set(CDN) - named)}: "
        "drop them from lakehouse/quality/offline_assets.py"
    )


def test_every_pin_is_an_exact_version_and_a_sha512() -> None:
    for package in PACKAGES:
        assert re.fullmatch(r"\d+\.\d+\.\d+", package.version), package
        digest = base64.b64decode(package.integrity.removeprefix("sha512-"), validate=True)
        assert package.integrity.startswith("sha512-") and len(digest) == 64, package
    assert len({p.folder for p in PACKAGES}) == len(PACKAGES)


def test_the_assets_folder_is_named_by_the_pins_in_the_cache() -> None:
    assert assets_dir({"TRIBUTARY_CACHE": "/c"}) == Path("/c/web") / pins_hash()


def test_every_mapped_file_has_been_downloaded() -> None:
    folder = downloaded()
    kept = {f"{p.folder}/{f}" for p in PACKAGES for f in p.files}
    missing = sorted(f for f in kept if not (folder / f).is_file())
    assert missing == [], f"{folder} lacks {missing}: {SETUP}"
    assert set(CDN.values()) <= kept


def test_the_local_scripts_are_the_bytes_the_pages_integrity_attributes_name() -> None:
    """Browsers refuse a script whose sha384 is not its `integrity`: the pages keep theirs."""
    folder = downloaded()
    pinned = {u: sri for t in gx_sources().values() for u, sri in SCRIPT_SRI.findall(t)}
    assert pinned, "GX's templates name no script integrity any more: drop this test"
    for url, sri in pinned.items():
        digest = hashlib.sha384((folder / CDN[url]).read_bytes()).digest()
        assert "sha384-" + base64.b64encode(digest).decode() == sri, url


def test_every_font_the_stylesheets_name_is_kept() -> None:
    """Relative url()s resolve in the local copy. The .ttf fallbacks are not kept: each
    follows a .woff2 in its @font-face, which every browser the UI supports reads."""
    folder = downloaded()
    for package in PACKAGES:
        for sheet in (f for f in package.files if f.endswith(".css")):
            path = folder / package.folder / sheet
            for ref in CSS_URL.findall(path.read_text()):
                if ref.startswith("data:") or ref.endswith(".ttf"):
                    continue
                assert (path.parent / ref).resolve().is_file(), f"{path} names {ref}: not kept"


def test_a_stylesheet_url_maps_to_a_stylesheet_and_a_script_url_to_a_script() -> None:
    for url, local in CDN.items():
        assert local.endswith(".css" if url.endswith(".css") else ".js"), (url, local)
