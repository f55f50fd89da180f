"""The Tributary view inside the Airflow UI: an Airflow plugin.

A FastAPI app at /tributary (behind Airflow's own login: every route asks Airflow who the caller
is, from the UI's session cookie, and refuses anyone else) and a "Tributary" entry in the UI's
navigation that shows it. The page itself is lakehouse.ops.overview_page, read with delta-rs:
it never starts Spark. Reports and Data Docs under the state folder's dq/ are served from here,
so a run's results open in the browser, not as a path in a log. Data Docs pages name public
CDNs for their CSS and JS: they are served with those URLs rewritten to /tributary/assets/, the
copy `make setup` downloads (lakehouse.quality.offline_assets), so they render offline.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import ClassVar

from airflow.api_fastapi.core_api.security import get_user
from airflow.plugins_manager import AirflowPlugin
from fastapi import Depends, FastAPI, HTTPException
from fastapi.responses import FileResponse, HTMLResponse, Response

PREFIX = "/tributary"
# Absolute: Data Docs pages sit at every depth under /tributary/dq/.
ASSETS_URL = f"{PREFIX}/assets"
# Relative to the page (/tributary/): the DAGs' pages, with their Trigger button.
LINKS = {
    "promote": "../dags/promote_version",
    "rollback": "../dags/rollback_version",
    "replay": "../dags/kappa_replay",
    "dq": "dq/",
}

app = FastAPI(title="Tributary", dependencies=[Depends(get_user)])


@app.get("/", response_class=HTMLResponse)
async def overview_page() -> str:
    return await asyncio.to_thread(_render)


@app.get("/dq/{relative:path}", response_model=None)
async def dq_file(relative: str) -> Response:
    """A file under the state folder's dq/ (a reconciliation report, the Data Docs); an HTML
    page with its CDN URLs pointed at /tributary/assets/."""
    from lakehouse.core.paths import dq_dir
    from lakehouse.quality.offline_assets import rewrite

    wanted = _inside(dq_dir(), relative, "report")
    if wanted.suffix.lower() != ".html":
        return FileResponse(wanted)
    page = await asyncio.to_thread(wanted.read_text, encoding="utf-8", errors="replace")
    return HTMLResponse(rewrite(page, ASSETS_URL))


@app.get("/assets/{relative:path}")
async def asset_file(relative: str) -> FileResponse:
    """A stylesheet, script or font of the Data Docs, from the folder `make setup` fills."""
    from lakehouse.quality.offline_assets import assets_dir

    return FileResponse(_inside(assets_dir(), relative, "asset", "; `make setup` downloads them"))


def _inside(root: Path, relative: str, what: str, remedy: str = "") -> Path:
    """root/relative if it is a file inside root (no "..", no symlink out of it); else 404."""
    base = root.resolve()
    wanted = (base / relative).resolve()
    if not wanted.is_relative_to(base) or not wanted.is_file():
        raise HTTPException(status_code=404, detail=f"no {what} {relative!r}{remedy}")
    return wanted


def _render() -> str:
    from lakehouse.core.config import get_settings
    from lakehouse.ops.overview import overview
    from lakehouse.ops.overview_page import render_overview

    return render_overview(overview(get_settings()), LINKS)


class TributaryPlugin(AirflowPlugin):
    name = "tributary"
    fastapi_apps: ClassVar = [{"app": app, "url_prefix": PREFIX, "name": "Tributary"}]
    external_views: ClassVar = [
        {
            "name": "Tributary",
            "href": f"{PREFIX.lstrip('/')}/",
            "destination": "nav",
            "url_route": "tributary",
        }
    ]
