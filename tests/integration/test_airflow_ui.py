"""The Airflow UI, used as a person would: in headless Chromium, log in, see the DAGs, fill in a
DAG's trigger form and run it; open the Data Docs through the Tributary view without internet.
Screenshots are kept in tests/artifacts/screenshots/."""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

from selenium.webdriver.common.by import By

from lakehouse.core.config import Settings
from lakehouse.core.paths import state_dir
from lakehouse.quality.offline_assets import JQUERY, assets_dir
from tests.integration.airflow_client import (
    Api,
    task_logs,
    tasks_report,
    unpaused,
    wait_for_run,
    wait_parsed,
)
from tests.integration.browser import (
    Browser,
    airflow_login,
    fill_field,
    login_error,
    open_trigger_form,
    shown_dag_ids,
    submit_login,
    submit_trigger_form,
    wait_for,
)
from tests.integration.data_docs_page import PAGE_LOADED, assert_rendered_offline

RUN_TIMEOUT = 180


def admin(settings: Settings) -> tuple[str, str]:
    airflow = settings.airflow
    assert airflow.admin_password is not None, "no Airflow admin password: run `make setup`"
    return airflow.admin_user, airflow.admin_password.get_secret_value()


def test_a_wrong_password_is_refused(
    browser: Browser, airflow_up: str, minio_settings: Settings
) -> None:
    user, _ = admin(minio_settings)
    submit_login(browser, airflow_up, user, f"wrong-{uuid.uuid4().hex}")
    error = wait_for(browser, login_error, "the login form's error")
    browser.screenshot("airflow_login_refused")
    assert "Invalid credentials" in error, error
    assert "/auth/login" in browser.current_url
    assert browser.find_element(By.NAME, "password").is_displayed()
    assert not shown_dag_ids(browser)


def test_the_admin_logs_in_sees_the_dags_and_runs_one_from_its_trigger_form(
    browser: Browser, airflow_up: str, minio_settings: Settings, api: Api, kafka_up: str
) -> None:
    dag_id = "generate_events"
    wait_parsed(api, dag_id)
    dag_ids = airflow_login(browser, airflow_up, *admin(minio_settings))
    browser.screenshot("airflow_dags")
    assert {"speed_layer", "generate_events"} <= set(dag_ids), dag_ids

    # The form unpauses the DAG when it triggers it; put it back as it was afterwards.
    with unpaused(api, dag_id):
        form = open_trigger_form(browser, airflow_up, dag_id)
        fill_field(form, "Events", "7")
        browser.screenshot("generate_events_trigger_form")
        run_id = submit_trigger_form(browser, form, dag_id)
        run, tis = wait_for_run(api, dag_id, run_id, RUN_TIMEOUT)
    logs = task_logs(api, dag_id, run_id, tis)
    assert run["conf"]["count"] == 7, run["conf"]
    assert run["run_type"] == "manual", run
    assert run["state"] == "success", (
        f"run {run_id} is {run['state']!r}:\n{tasks_report(tis, logs)}"
    )
    assert "sent 7/7 records" in logs["produce"], logs["produce"]
    # The run page the form opened, now showing the finished run.
    browser.refresh()
    wait_for(browser, lambda d: "Success" in d.find_element(By.TAG_NAME, "body").text, "Success")
    browser.screenshot("generate_events_run")


def test_the_tributary_view_is_behind_the_login(airflow_up: str, api: Api) -> None:
    """The plugin's page (plugins/tributary_view.py) in the running Airflow: refused without
    Airflow's login, and nothing outside the state folder's dq/ served. (Shown in the UI's
    navigation, by a user: test_airflow_walk.)"""
    import requests

    anonymous = requests.get(f"{airflow_up}/tributary/", timeout=30)
    assert anonymous.status_code in (401, 403), anonymous.status_code
    assert requests.get(f"{airflow_up}/tributary/dq/x.html", timeout=30).status_code in (401, 403)
    page = api.session.get(f"{airflow_up}/tributary/", timeout=30)
    assert page.status_code == 200, page.text
    for section in ("Replay versions", "Speed layer", "Reconciliation", "Data quality"):
        assert section in page.text, section
    escaping = api.session.get(f"{airflow_up}/tributary/dq/..%2F..%2Fsecrets.env", timeout=30)
    assert escaping.status_code == 404, "nothing outside dq/ is served"


def test_the_data_docs_render_offline_from_the_local_assets(
    browser: Browser, airflow_up: str, minio_settings: Settings
) -> None:
    """Real Data Docs, opened through the view: every stylesheet, script and font comes from
    /tributary/assets/ (lakehouse.quality.offline_assets), nothing from a CDN."""
    import requests

    assert (assets_dir() / ".complete").is_file(), (
        f"the Data Docs' web assets are not in {assets_dir()}: run `make setup`"
    )
    asset = f"{airflow_up}/tributary/assets/{JQUERY.folder}/dist/jquery.min.js"
    assert requests.get(asset, timeout=30).status_code in (401, 403), "assets are behind the login"
    dq = state_dir() / "dq"
    site = dq / "tests" / f"data_docs_{uuid.uuid4().hex[:8]}"
    try:
        pages = render_data_docs(site)
        airflow_login(browser, airflow_up, *admin(minio_settings))
        for page in pages:
            browser.get(f"{airflow_up}/tributary/dq/{page.relative_to(dq).as_posix()}")
            assert "/tributary/assets/" in browser.page_source, (
                f"{page.name} is served with its CDN URLs: the running Airflow has an older "
                "plugins/tributary_view.py; restart it (make test-down && make test-up)"
            )
            loaded = browser.execute_async_script(PAGE_LOADED)
            browser.screenshot(f"data_docs_offline_{page.stem}")
            assert_rendered_offline(page.name, loaded)
    finally:
        shutil.rmtree(site, ignore_errors=True)


def render_data_docs(site: Path) -> list[Path]:
    """GX's Data Docs of one small validation (pandas, no Spark), in a site configured as the
    platform's (lakehouse.quality.validate): the index, the suite's page and the validation's
    page, one of each kind GX renders."""
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    import great_expectations as gx
    import pandas as pd
    from great_expectations.checkpoint import UpdateDataDocsAction

    from lakehouse.quality.validate import SITE, _context

    context = _context(site)  # the platform's own site: its index, its stores
    batch = (
        context.data_sources.add_pandas("frame")
        .add_dataframe_asset("events")
        .add_batch_definition_whole_dataframe("all")
    )
    check = gx.expectations.ExpectColumnValuesToNotBeNull(column="user_id")
    suite = context.suites.add(gx.ExpectationSuite(name="offline", expectations=[check]))
    definition = context.validation_definitions.add(
        gx.ValidationDefinition(name="offline", data=batch, suite=suite)
    )
    docs = UpdateDataDocsAction(name="docs", site_names=[SITE])
    checkpoint = context.checkpoints.add(
        gx.Checkpoint(name="offline", validation_definitions=[definition], actions=[docs])
    )
    checkpoint.run(batch_parameters={"dataframe": pd.DataFrame({"user_id": ["u1", None]})})
    pages = sorted(site.rglob("*.html"))
    assert len(pages) == 3, pages
    return pages
