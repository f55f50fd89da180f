"""The HTML report of one run: self-contained (inline CSS and SVG, no script, no CDN), so it
opens from a file anywhere, offline, and can be attached or archived as it is.

Order: the summary and verdict; the unexplained differences (worst first); per view a chart
of left vs right per window over time, unexplained windows marked; the explained ones.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lakehouse.reconcile.gate import GateVerdict
from lakehouse.reconcile.summary import scope_text

if TYPE_CHECKING:
    from lakehouse.reconcile.run import Reconciliation, SeriesPoint, ViewComparison

WIDTH, HEIGHT = 920, 260
MARGIN_LEFT, MARGIN_RIGHT, MARGIN_TOP, MARGIN_BOTTOM = 64, 16, 16, 40
LEFT_COLOUR, RIGHT_COLOUR, ALERT_COLOUR = "#1f6fb4", "#e8871e", "#d62728"

STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 24px; color: #222; max-width: 1100px; }
h1 { font-size: 22px; } h2 { font-size: 18px; margin-top: 32px; } h3 { font-size: 15px; }
table { border-collapse: collapse; margin: 8px 0 16px; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: right; vertical-align: top; }
th { background: #f2f2f2; } td.text, th.text { text-align: left; }
td.explanation { min-width: 320px; }
.verdict { display: inline-block; padding: 4px 10px; border-radius: 4px; color: #fff; }
.passed { background: #2c8a3c; } .failed { background: #c0392b; }
tr.beyond td { background: #fdecea; }
.meta td, .meta th { text-align: left; }
.muted { color: #777; }
svg.chart { border: 1px solid #ddd; background: #fff; }
"""


def write_report(run: Reconciliation, verdict: GateVerdict, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(render_report(run, verdict), encoding="utf-8")
    tmp.replace(path)  # readers never see half a report
    return path


def render_report(run: Reconciliation, verdict: GateVerdict) -> str:
    title = f"Reconciliation {run.left} vs {run.right}"
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{escape(title)} - {escape(run.run_id)}</title>",
        f"<style>{STYLE}</style></head><body>",
        f"<h1>{escape(title)}</h1>",
        _meta(run, verdict),
        "<h2>Summary</h2>",
        _summary_table(run),
        '<h2 id="unexplained">Unexplained differences</h2>',
    ]
    if any(v.unexplained for v in run.views):
        parts += [_rows_table(v, v.unexplained, "unexplained") for v in run.views if v.unexplained]
    else:
        parts.append('<p class="muted">None.</p>')
    parts.append(f"<h2>{escape(run.left)} vs {escape(run.right)} per window</h2>")
    for v in run.views:
        parts.append(f"<h3>{escape(v.view)}</h3>")
        parts.append(_chart(v, run.left, run.right))
    parts.append('<h2 id="explained">Explained differences</h2>')
    if any(v.explained for v in run.views):
        parts += [_rows_table(v, v.explained, "explained") for v in run.views if v.explained]
    else:
        parts.append('<p class="muted">None.</p>')
    parts.append("</body></html>")
    return "\n".join(parts)


def _meta(run: Reconciliation, verdict: GateVerdict) -> str:
    state = "passed" if verdict.passed else "failed"
    thresholds = ", ".join(f"{k} {v:g}" for k, v in sorted(run.thresholds.items())) or "exact"
    rows = [
        ("Run", run.run_id),
        ("Started", _when(run.started_at)),
        ("Left / right", f"{run.left} / {run.right}"),
        ("Range", scope_text(run)),
        ("Thresholds", f"{thresholds}; at most {run.max_unexplained_windows} window(s) beyond"),
    ]
    reasons = "".join(f"<li>{escape(r)}</li>" for r in verdict.reasons)
    body = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in rows)
    return (
        f'<p><span class="verdict {state}" id="verdict">gate {state}</span></p>'
        + (f"<ul>{reasons}</ul>" if reasons else "")
        + f'<table class="meta">{body}</table>'
    )


def _summary_table(run: Reconciliation) -> str:
    head = (
        '<tr><th class="text">view</th><th>compared</th><th>equal</th><th>explained</th>'
        "<th>unexplained</th><th>beyond threshold</th><th>open (left out)</th>"
        '<th class="text">note</th></tr>'
    )
    body = [
        f'<tr><td class="text">{escape(v.view)}</td><td>{v.compared}</td>'
        f"<td>{v.counts['equal']}</td><td>{v.counts['explained']}</td>"
        f"<td>{v.counts['unexplained']}</td><td>{v.beyond_threshold}</td>"
        f'<td>{v.counts["open"]}</td><td class="text">{escape(v.note or "")}</td></tr>'
        for v in run.views
    ]
    totals = [
        sum(v.compared for v in run.views),
        *(sum(v.counts[s] for v in run.views) for s in ("equal", "explained", "unexplained")),
        sum(v.beyond_threshold for v in run.views),
        sum(v.counts["open"] for v in run.views),
    ]
    total_row = '<tr><th class="text">all views</th>' + "".join(f"<th>{t}</th>" for t in totals)
    return (
        f'<table id="summary">{head}{"".join(body)}{total_row}<th></th></tr></table>'
        '<p class="muted">Only windows final on both sides are compared; the others are '
        "counted as open. Explained: adding back the events a side left out on purpose (late "
        "events, events the batch had not read yet) makes both sides agree.</p>"
    )


def _rows_table(v: ViewComparison, rows: Sequence[dict[str, Any]], status: str) -> str:
    metric_heads = "".join(
        f"<th>{escape(m)} {side}</th>"
        for m in v.metrics
        for side in ("left", "right", "diff", "unexplained")
    )
    head = (
        "<tr>"
        + "".join(f'<th class="text">{escape(k)}</th>' for k in v.keys)
        + metric_heads
        + '<th class="text">explanation</th></tr>'
    )
    body = []
    for r in rows:
        cells = "".join(f'<td class="text">{escape(_cell(r[k]))}</td>' for k in v.keys)
        cells += "".join(
            f"<td>{escape(_cell(r[f'{p}_{m}']))}</td>"
            for m in v.metrics
            for p in ("left", "right", "diff", "unexplained")
        )
        cells += f'<td class="text explanation">{escape(_cell(r["explanation"]))}</td>'
        css = ' class="beyond"' if r.get("beyond_threshold") else ""
        body.append(f"<tr{css}>{cells}</tr>")
    shown = f"first {len(rows)}" if len(rows) < v.counts[status] else f"all {len(rows)}"
    return (
        f"<h3>{escape(v.view)}: {v.counts[status]} {status} ({shown})</h3>"
        f'<table class="windows {status}" data-view="{escape(v.view)}">{head}'
        f"{''.join(body)}</table>"
    )


def _chart(v: ViewComparison, left: str, right: str) -> str:
    if not v.series:
        return f'<p class="muted">No window compared{": " + escape(v.note) if v.note else ""}.</p>'
    points = v.series
    t0, t1 = points[0].time.timestamp(), points[-1].time.timestamp()
    top = max(max(p.left, p.right) for p in points) or 1.0
    plot_w = WIDTH - MARGIN_LEFT - MARGIN_RIGHT
    plot_h = HEIGHT - MARGIN_TOP - MARGIN_BOTTOM

    def x(p: SeriesPoint) -> float:
        share = 0.5 if t1 == t0 else (p.time.timestamp() - t0) / (t1 - t0)
        return MARGIN_LEFT + share * plot_w

    def y(value: float) -> float:
        return MARGIN_TOP + plot_h * (1 - value / top)

    def line(side: str, colour: str, css: str) -> str:
        """One polyline per run of consecutive buckets: a bucket with no window compared is a
        gap, not a straight line across it; a point alone is a dot."""
        drawn = []
        for run in _runs(points, v.bucket_seconds):
            coords = [(x(p), y(getattr(p, side))) for p in run]
            if len(coords) == 1:
                [(cx, cy)] = coords
                drawn.append(
                    f'<circle class="{css}" cx="{cx:.1f}" cy="{cy:.1f}" r="2.5" fill="{colour}"/>'
                )
                continue
            joined = " ".join(f"{cx:.1f},{cy:.1f}" for cx, cy in coords)
            drawn.append(
                f'<polyline class="{css}" fill="none" stroke="{colour}" stroke-width="1.6" '
                f'points="{joined}"/>'
            )
        return "".join(drawn)

    alerts = "".join(
        f'<circle class="unexplained" cx="{x(p):.1f}" cy="{y(max(p.left, p.right)):.1f}" r="4" '
        f'fill="{ALERT_COLOUR}"><title>{_when(p.time)}: {p.unexplained} unexplained '
        f"window(s)</title></circle>"
        for p in points
        if p.unexplained
    )
    axis_y = MARGIN_TOP + plot_h
    ticks = "".join(
        f'<text x="{MARGIN_LEFT - 6}" y="{y(top * f) + 4:.1f}" text-anchor="end" '
        f'font-size="11">{top * f:,.0f}</text>'
        f'<line x1="{MARGIN_LEFT}" x2="{WIDTH - MARGIN_RIGHT}" y1="{y(top * f):.1f}" '
        f'y2="{y(top * f):.1f}" stroke="#eee"/>'
        for f in (0, 0.5, 1)
    )
    shown = _spread(points, 5)
    # The first and last labels end at the plot's edges: centred there, they would be cut.
    anchors = ["middle"] * len(shown)
    if len(shown) > 1:
        anchors[0], anchors[-1] = "start", "end"
    labels = "".join(
        f'<text x="{x(p):.1f}" y="{axis_y + 16}" text-anchor="{anchor}" font-size="11">'
        f"{p.time:%m-%d %H:%M}</text>"
        for p, anchor in zip(shown, anchors, strict=True)
    )
    legend = (
        f'<text x="{MARGIN_LEFT}" y="{HEIGHT - 6}" font-size="12" fill="{LEFT_COLOUR}">'
        f"- {escape(left)}</text>"
        f'<text x="{MARGIN_LEFT + 120}" y="{HEIGHT - 6}" font-size="12" fill="{RIGHT_COLOUR}">'
        f"- {escape(right)}</text>"
        f'<text x="{MARGIN_LEFT + 240}" y="{HEIGHT - 6}" font-size="12" fill="{ALERT_COLOUR}">'
        f"o unexplained</text>"
        f'<text x="{WIDTH - MARGIN_RIGHT}" y="{HEIGHT - 6}" font-size="11" text-anchor="end" '
        f'fill="#777">{escape(_caption(v))}</text>'
    )
    return (
        f'<svg class="chart" data-view="{escape(v.view)}" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" xmlns="http://www.w3.org/2000/svg" role="img">'
        f"<title>{escape(v.view)}: events per window, {escape(left)} vs {escape(right)}</title>"
        f"{ticks}"
        f'<line x1="{MARGIN_LEFT}" x2="{WIDTH - MARGIN_RIGHT}" y1="{axis_y}" y2="{axis_y}" '
        f'stroke="#999"/>'
        f"{line('left', LEFT_COLOUR, 'series-left')}"
        f"{line('right', RIGHT_COLOUR, 'series-right')}"
        f"{alerts}{labels}{legend}</svg>"
    )


def _caption(v: ViewComparison) -> str:
    """What a point of the chart counts: the events of the view's rows whose time column falls
    in its bucket (a window's events, or a session's)."""
    minutes = v.bucket_seconds // 60
    return f"events of the {v.view} rows, per {minutes} min of {v.time_column}"


def _runs(points: Sequence[SeriesPoint], bucket_seconds: int) -> list[list[SeriesPoint]]:
    """The points cut where a bucket between two of them holds nothing compared."""
    runs: list[list[SeriesPoint]] = []
    for p in points:
        if runs and (p.time - runs[-1][-1].time).total_seconds() <= bucket_seconds:
            runs[-1].append(p)
        else:
            runs.append([p])
    return runs


def _spread(points: Sequence[SeriesPoint], count: int) -> list[SeriesPoint]:
    if len(points) <= count:
        return list(points)
    step = (len(points) - 1) / (count - 1)
    return [points[round(i * step)] for i in range(count)]


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, datetime):
        return _when(value)
    return str(value)


def _when(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")
