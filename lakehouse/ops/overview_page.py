"""The Tributary view's HTML: one self-contained page (no script, no style or font from a CDN,
so it renders offline), from an Overview (lakehouse.ops.overview)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from html import escape
from typing import Any

from lakehouse.ops.overview import Overview, promotion_effect, served_by

STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5rem; color: #222; }
h1 { font-size: 1.4rem; } h2 { font-size: 1.1rem; margin-top: 2rem; }
table { border-collapse: collapse; margin: .5rem 0; }
th, td { border: 1px solid #ddd; padding: .3rem .6rem; text-align: left; font-size: .9rem; }
th { background: #f4f4f4; }
.passed, .healthy, .caught_up { color: #176f2c; font-weight: 600; }
.failed, .stale, .lagging, .slow { color: #b00020; font-weight: 600; }
.note { color: #555; font-size: .9rem; }
.charts { display: flex; flex-wrap: wrap; gap: 1rem; }
figure { margin: 0; } figcaption { font-size: .85rem; color: #444; }
svg.chart { border: 1px solid #ddd; background: #fff; }
"""
WIDTH, HEIGHT, PAD = 360, 150, 34
# (column or derived measure, caption)
CHARTS = (
    ("freshness_seconds", "freshness (s): newest event to its commit"),
    ("total_lag", "Kafka lag (records left in the log)"),
    ("rows_per_second", "rate (records/s)"),
    ("late_share", "late share (late / new events)"),
)


def render_overview(view: Overview, links: dict[str, str]) -> str:
    """The page. `links`: the Airflow pages it points to (promote, rollback, replay, reports
    prefix), relative to the page."""
    body = [
        "<h1>Tributary</h1>",
        f"<p>Serving reads: <b>{escape(served_by(view.listing, view.mode))}</b>.</p>",
        _versions(view, links),
        _health(view),
        _reconciliations(view, links),
        _quality(view, links),
    ]
    return (
        '<!doctype html><html><head><meta charset="utf-8"><title>Tributary</title>'
        # Shown in the Airflow UI's frame: a link opens in the whole window.
        '<base target="_top">'
        f"<style>{STYLE}</style></head><body>{''.join(body)}</body></html>"
    )


def _versions(view: Overview, links: dict[str, str]) -> str:
    listing = view.listing
    head = "<h2>Replay versions</h2>"
    if not listing.versions:
        return head + (
            '<p id="versions">No replay version yet: run the '
            f'<a href="{links["replay"]}">kappa_replay</a> DAG (a dry run shows its plan).</p>'
        )
    rows = []
    for v in listing.versions:
        size = listing.sizes_mb.get(v.version)
        rows.append(
            (
                ("active " if v.active else "") + v.version,
                f'<span class="{escape(v.status)}">{escape(v.status)}</span>',
                _when(v.created_at),
                "-" if v.records is None else f"{v.records:,}",
                "-" if size is None else f"{size:.1f}",
                escape(v.start),
                escape(promotion_effect(v, listing.active, view.mode)),
            )
        )
    note = f'<p class="note">{escape(listing.unserved)}</p>' if listing.unserved else ""
    actions = (
        f'<p><a href="{links["promote"]}">Promote a version</a> · '
        f'<a href="{links["rollback"]}">Roll back</a> · '
        f'<a href="{links["replay"]}">Replay the log into a new version</a></p>'
    )
    headers = ("version", "status", "created (UTC)", "records", "MB", "from", "promoting it")
    return head + _table("versions", headers, rows) + note + actions


def _health(view: Overview) -> str:
    head = "<h2>Speed layer</h2>"
    h = view.health
    verdict = (
        '<p class="note">Kafka cannot be reached: no verdict on the stream\'s health.</p>'
        if h is None
        else f'<p id="health" class="{h.status}">{escape(h.message)}</p>'
    )
    if not view.progress:
        return head + verdict + "<p>No micro-batch yet.</p>"
    charts = "".join(
        _chart(name, caption, [_measure(r, name) for r in view.progress])
        for name, caption in CHARTS
    )
    span = f"the last {len(view.progress)} micro-batches, oldest on the left"
    return head + verdict + f'<p class="note">{span}</p><div class="charts">{charts}</div>'


def _measure(row: dict[str, Any], name: str) -> float | None:
    if name == "late_share":
        new = row.get("new_events") or 0
        return (row.get("late_events") or 0) / new if new else None
    value = row.get(name)
    return None if value is None else float(value)


def _chart(name: str, caption: str, values: Sequence[float | None]) -> str:
    """A line through the batches' values; a batch without one leaves a gap."""
    known = [v for v in values if v is not None]
    top = max(known, default=0.0) or 1.0
    step = (WIDTH - 2 * PAD) / max(len(values) - 1, 1)

    def point(i: int, v: float) -> str:
        return f"{PAD + i * step:.1f},{HEIGHT - PAD - v / top * (HEIGHT - 2 * PAD):.1f}"

    segments: list[list[str]] = [[]]
    for i, v in enumerate(values):
        if v is None:
            segments.append([])
        else:
            segments[-1].append(point(i, v))
    lines = "".join(
        f'<polyline fill="none" stroke="#1f5fa8" stroke-width="1.5" points="{" ".join(s)}"/>'
        if len(s) > 1
        else f'<circle r="2" fill="#1f5fa8" cx="{s[0].split(",")[0]}" cy="{s[0].split(",")[1]}"/>'
        for s in segments
        if s
    )
    labels = (
        f'<text x="4" y="{PAD}" font-size="10">{_number(top)}</text>'
        f'<text x="4" y="{HEIGHT - PAD}" font-size="10">0</text>'
    )
    return (
        f'<figure><svg class="chart" data-measure="{name}" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" xmlns="http://www.w3.org/2000/svg" role="img">'
        f"{lines}{labels}</svg><figcaption>{escape(caption)}</figcaption></figure>"
    )


def _reconciliations(view: Overview, links: dict[str, str]) -> str:
    # Windows of a view, keys or versions of a captured table, rows of a join's output: each
    # row of dq.reconciliation_runs counts what it compared.
    head = "<h2>Reconciliation: the latest run per view</h2>"
    if not view.reconciliations:
        return head + "<p>No reconciliation yet (the reconcile DAG runs after each batch run).</p>"
    rows = [
        (
            escape(r["view"]),
            escape(f"{r['left_source']} vs {r['right_source']}"),
            _when(r["started_at"]),
            _verdict(r["verdict"]),
            f"{r['compared'] or 0:,} compared, {r['unexplained'] or 0:,} unexplained",
            _report_link(r.get("report_path"), links),
        )
        for r in view.reconciliations
    ]
    return head + _table(
        "reconciliations", ("view", "sides", "at (UTC)", "gate", "rows", "report"), rows
    )


def _quality(view: Overview, links: dict[str, str]) -> str:
    head = "<h2>Data quality: the latest run per table</h2>"
    if not view.quality:
        return head + "<p>No quality run yet (the data_quality DAG).</p>"
    rows = [
        (
            escape(r["table_name"]),
            _when(r["checked_at"]),
            _verdict(r["verdict"]),
            escape(r.get("broken") or ""),
            _report_link(r.get("data_docs"), links),
        )
        for r in view.quality
    ]
    return head + _table("quality", ("table", "at (UTC)", "verdict", "broken", "Data Docs"), rows)


def _verdict(verdict: str | None) -> str:
    """A run's verdict, coloured by its class (passed, failed)."""
    return f'<span class="{escape(verdict or "")}">{escape(verdict or "-")}</span>'


def _report_link(path: str | None, links: dict[str, str]) -> str:
    """A link through the view to a report under the state folder's dq/ (its path there)."""
    marker = "/dq/"
    if not path or marker not in path:
        return "-"
    relative = path.split(marker, 1)[1]
    return f'<a href="{links["dq"]}{escape(relative)}">open</a>'


def _table(name: str, headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table id="{name}"><tr>{head}</tr>{body}</table>'


def _when(moment: datetime | None) -> str:
    return "-" if moment is None else f"{moment:%Y-%m-%d %H:%M}"


def _number(value: float) -> str:
    return f"{value:,.0f}" if value >= 10 else f"{value:.2g}"
