"""Great Expectations Data Docs without internet: their stylesheets, scripts and fonts served
from a local copy instead of the public CDNs the pages name.

PACKAGES pins the npm packages those files come from (exact version, the sha512 of the
tarball, the files the pages load); `make setup` (infra/web_assets.py) downloads them once into
assets_dir(). The Tributary view (plugins/tributary_view.py) serves that folder and passes each
Data Docs page through rewrite(). Standard library only: the bootstrap reads the pins before the
venv exists.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from lakehouse.core.paths import cache_dir


@dataclass(frozen=True)
class Package:
    name: str
    version: str
    integrity: str  # the registry's dist.integrity of the tarball: "sha512-<base64>"
    files: tuple[str, ...]  # paths inside the package; only these are kept

    @property
    def folder(self) -> str:
        """Where its files live under assets_dir(), their relative paths kept (Font Awesome's
        stylesheet finds its fonts at ../webfonts/)."""
        return f"{self.name}@{self.version}"

    def local(self, file: str) -> str:
        assert file in self.files, f"{file} is not kept from {self.folder}"
        return f"{self.folder}/{file}"


BOOTSTRAP = Package(
    "bootstrap",
    "4.3.1",
    "sha512-rXqOmH1VilAt2DyPzluTi2blhk17bO7ef+zLLPlWvG494pDxcM234pJ8wTc/6R40UWizAIIMgxjvxZg5kmsbag==",
    ("dist/css/bootstrap.min.css", "dist/js/bootstrap.min.js"),
)
JQUERY = Package(
    "jquery",
    "3.7.1",
    "sha512-m4avr8yL8kmFN8psrbFFFmB/If14iN5o9nw/NgnnM+kybDJpRsAynV2BsfpTYrTRysYUdADVD7CkUUizgkpLfg==",
    ("dist/jquery.min.js",),
)
POPPER = Package(
    "popper.js",
    "1.12.9",
    "sha512-s0EEi9xiSCdqz9lV4IiVH5yIZnDX/U1t0tCjB+0jXx9jW8lrR7kOpVupiUg175ogqVoudpDXHF1p6dKATCHMeg==",
    ("dist/umd/popper.min.js",),
)
FILTER_CONTROL = "dist/extensions/filter-control/bootstrap-table-filter-control"
TABLE = Package(
    "bootstrap-table",
    "1.19.1",
    "sha512-WvV+l1AI/C+zThaKmfHmi/IuayVNB0qdFyEhFx1jyZhO0oLtNJNANkCR3rvJf6Dkh72dsLElxpE/bzK9seEQLA==",
    ("dist/bootstrap-table.min.css", "dist/bootstrap-table.min.js", f"{FILTER_CONTROL}.min.js"),
)
# The pages take the filter-control stylesheets from the release before.
TABLE_PREVIOUS = Package(
    "bootstrap-table",
    "1.19.0",
    "sha512-L+USHm3X9FKocx/6yngGu12yF6r6s1Ntuc+hoIK2a2QQJjHw5kcySLiE2HY/9sEaSGAOfPbfQOtBH3uKkcpqEA==",
    (f"{FILTER_CONTROL}.css", f"{FILTER_CONTROL}.min.css"),
)
DATEPICKER = Package(
    "bootstrap-datepicker",
    "1.9.0",
    "sha512-9rYYbaVOheGYxjOr/+bJCmRPihfy+LkLSg4fIFMT9Od8WwWB/MB50w0JO1eBgKUMbb7PFHQD5uAfI3ArAxZRXA==",
    ("dist/css/bootstrap-datepicker.min.css", "dist/js/bootstrap-datepicker.min.js"),
)
# Every browser the UI supports takes woff2; the stylesheet's .ttf fallbacks are left out.
FONT_AWESOME = Package(
    "@fortawesome/fontawesome-free",
    "6.6.0",
    "sha512-60G28ke/sXdtS9KZCpZSHHkCbdsOGEhIUGlwq6yhY74UpTiToIh8np7A8yphhM4BWsvNFtIvLpi4co+h9Mr9Ow==",
    (
        "css/all.min.css",
        "webfonts/fa-brands-400.woff2",
        "webfonts/fa-regular-400.woff2",
        "webfonts/fa-solid-900.woff2",
        "webfonts/fa-v4compatibility.woff2",
    ),
)
DARK = Package(
    "@forevolve/bootstrap-dark",
    "1.1.0",
    "sha512-A3ucpEpxPoTVO490lZZCfjPXxv832l7mm1IxX3bXyxvgwnPGXDLyh7dWrphXKO8YBAu3EswbBEu3VSW8NRMW3A==",
    ("dist/css/bootstrap-prefers-dark.css",),
)
# The pages ask for the newest vega@5, vega-lite@5 and vega-embed@6: pinned here at the newest
# release of each major (2025), so every machine shows the same thing.
VEGA = Package(
    "vega",
    "5.33.1",
    "sha512-1fArfVDUqVbb5z8n+/nVQb+VNBzx8svY6CrsyTK4Ujm4yrd9I1auoKxBAPXLCavY1LcrbHUskQbGUP8gXOzyQw==",
    ("build/vega.min.js",),
)
VEGA_LITE = Package(
    "vega-lite",
    "5.23.0",
    "sha512-l4J6+AWE3DIjvovEoHl2LdtCUkfm4zs8Xxx7INwZEAv+XVb6kR6vIN1gt3t2gN2gs/y4DYTs/RPoTeYAuEg6mA==",
    ("build/vega-lite.min.js",),
)
VEGA_EMBED = Package(
    "vega-embed",
    "6.29.0",
    "sha512-PmlshTLtLFLgWtF/b23T1OwX53AugJ9RZ3qPE2c01VFAbgt3/GSNI/etzA/GzdrkceXFma+FDHNXUppKuM0U6Q==",
    ("build/vega-embed.min.js",),
)
PACKAGES = (
    BOOTSTRAP,
    JQUERY,
    POPPER,
    TABLE,
    TABLE_PREVIOUS,
    DATEPICKER,
    FONT_AWESOME,
    DARK,
    VEGA,
    VEGA_LITE,
    VEGA_EMBED,
)

UNPKG = "https://unpkg.com/bootstrap-table"
CDNJS = "https://cdnjs.cloudflare.com/ajax/libs"
JSDELIVR = "https://cdn.jsdelivr.net/npm"
# Each URL a Data Docs page (GX 1.x templates) loads -> the local file, relative to assets_dir().
CDN = {
    "https://maxcdn.bootstrapcdn.com/bootstrap/4.3.1/css/bootstrap.min.css": BOOTSTRAP.local(
        "dist/css/bootstrap.min.css"
    ),
    "https://stackpath.bootstrapcdn.com/bootstrap/4.3.1/js/bootstrap.min.js": BOOTSTRAP.local(
        "dist/js/bootstrap.min.js"
    ),
    "https://code.jquery.com/jquery-3.7.1.min.js": JQUERY.local("dist/jquery.min.js"),
    f"{CDNJS}/popper.js/1.12.9/umd/popper.min.js": POPPER.local("dist/umd/popper.min.js"),
    f"{UNPKG}@1.19.1/dist/bootstrap-table.min.css": TABLE.local("dist/bootstrap-table.min.css"),
    f"{UNPKG}@1.19.1/dist/bootstrap-table.min.js": TABLE.local("dist/bootstrap-table.min.js"),
    f"{UNPKG}@1.19.1/{FILTER_CONTROL}.min.js": TABLE.local(f"{FILTER_CONTROL}.min.js"),
    f"{UNPKG}@1.19.0/{FILTER_CONTROL}.css": TABLE_PREVIOUS.local(f"{FILTER_CONTROL}.css"),
    f"{UNPKG}@1.19.0/{FILTER_CONTROL}.min.css": TABLE_PREVIOUS.local(f"{FILTER_CONTROL}.min.css"),
    f"{CDNJS}/bootstrap-datepicker/1.9.0/css/bootstrap-datepicker.min.css": DATEPICKER.local(
        "dist/css/bootstrap-datepicker.min.css"
    ),
    f"{CDNJS}/bootstrap-datepicker/1.9.0/js/bootstrap-datepicker.min.js": DATEPICKER.local(
        "dist/js/bootstrap-datepicker.min.js"
    ),
    f"{CDNJS}/font-awesome/6.6.0/css/all.min.css": FONT_AWESOME.local("css/all.min.css"),
    f"{JSDELIVR}/@forevolve/bootstrap-dark@1.1.0/dist/css/bootstrap-prefers-dark.css": DARK.local(
        "dist/css/bootstrap-prefers-dark.css"
    ),
    f"{JSDELIVR}/vega@5": VEGA.local("build/vega.min.js"),
    f"{JSDELIVR}/vega-lite@5": VEGA_LITE.local("build/vega-lite.min.js"),
    f"{JSDELIVR}/vega-embed@6": VEGA_EMBED.local("build/vega-embed.min.js"),
}

# GX's logo images (an <img> and a CSS background) come from its own S3 bucket; they become a
# transparent pixel, so a page requests nothing from outside.
LOGO = re.compile(r"https?://great-expectations-web-assets\.s3[\w.-]*\.amazonaws\.com/[^\"'\s)]*")
BLANK_IMAGE = "data:image/gif;base64,R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7"
# Whole URLs only (up to a quote, space or ")"): jsdelivr's ".../vega@5" must not match inside
# a longer URL. Longest first, so no URL is cut at a shorter one it starts with.
_CDN_URL = re.compile(
    "(?:"
    + "|".join(re.escape(url) for url in sorted(CDN, key=len, reverse=True))
    + r")(?=[\"'\s)>])"
)


def pins_hash() -> str:
    """A short hash of PACKAGES: the assets' folder name, so a changed pin gets a new folder."""
    pins = json.dumps([asdict(p) for p in PACKAGES], sort_keys=True)
    return hashlib.sha256(pins.encode()).hexdigest()[:12]


def assets_dir(env: Mapping[str, str] | None = None) -> Path:
    """The downloaded files, laid out as <name>@<version>/<path in the package>."""
    return cache_dir(env) / "web" / pins_hash()


def rewrite(html: str, prefix: str) -> str:
    """`html` with each CDN URL of CDN replaced by `prefix`/<local file> and GX's logo by a
    blank image. Links to web pages (<a href>) are left alone: they load nothing."""
    base = prefix.rstrip("/")
    local = _CDN_URL.sub(lambda m: f"{base}/{CDN[m.group(0)]}", html)
    return LOGO.sub(BLANK_IMAGE, local)
