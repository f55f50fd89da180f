"""What a Data Docs page loaded in the browser, and the check that it rendered offline: every
stylesheet, script and font from the Tributary view's /tributary/assets/, none from a CDN."""

from __future__ import annotations

from typing import Any

from lakehouse.quality.offline_assets import JQUERY, VEGA, VEGA_LITE

# What a Data Docs page loaded, read in the page once its fonts are asked for.
PAGE_LOADED = """
const done = arguments[arguments.length - 1];
const fonts = ['900 16px "Font Awesome 6 Free"', '400 16px "Font Awesome 6 Brands"'];
Promise.all(fonts.map(f => document.fonts.load(f))).then(faces => done({
  origin: location.origin,
  jquery: window.jQuery ? jQuery.fn.jquery : null,
  missing: ['modal', 'bootstrapTable', 'datepicker'].filter(p => !window.jQuery?.fn[p]),
  popper: typeof window.Popper,
  vega: window.vega ? vega.version : null,
  vegaLite: window.vegaLite ? vegaLite.version : null,
  vegaEmbed: typeof window.vegaEmbed,
  fonts: faces.map(f => f.length),
  stylesheets: document.querySelectorAll('link[rel=stylesheet]').length,
  rules: [...document.styleSheets].filter(s => s.href).map(s => s.cssRules.length),
  navbar: getComputedStyle(document.querySelector('nav.navbar')).display,
  loaded: performance.getEntriesByType('resource').map(e => [e.name, e.responseStatus]),
}), err => done({error: String(err)}));
"""


def assert_rendered_offline(page: str, loaded: dict[str, Any]) -> None:
    assert "error" not in loaded, (page, loaded)
    outside = [url for url, _ in loaded["loaded"] if not url.startswith(loaded["origin"])]
    assert outside == [], f"{page} loaded from outside: {outside}"
    failed = [(u, s) for u, s in loaded["loaded"] if "/tributary/assets/" in u and s != 200]
    assert failed == [], f"{page}: assets not served: {failed}"
    assert loaded["jquery"] == JQUERY.version and loaded["missing"] == [], (page, loaded)
    assert (loaded["vega"], loaded["vegaLite"]) == (VEGA.version, VEGA_LITE.version), page
    assert (loaded["popper"], loaded["vegaEmbed"]) == ("function", "function"), page
    assert loaded["fonts"] == [1, 1], f"{page}: Font Awesome did not load"
    assert len(loaded["rules"]) == loaded["stylesheets"] and all(loaded["rules"]), (page, loaded)
    assert loaded["navbar"] == "flex", f"{page}: Bootstrap's CSS is not applied"
