"""The Airflow UI, used as a person would: in headless Chromium, log in, see the DAGs, fill in a
DAG's trigger form and run it. Screenshots are kept in tests/artifacts/screenshots/."""

from __future__ import annotations

import uuid

from selenium.webdriver.common.by import By

from lakehouse.core.config import Settings
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


def test_the_tributary_view_is_behind_the_login_and_shows_the_platform(
    browser: Browser, airflow_up: str, minio_settings: Settings, api: Api
) -> None:
    """The plugin's page (plugins/tributary_view.py) in the running Airflow: refused without
    Airflow's login, shown in the UI's navigation after it, read without Spark."""
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

    airflow_login(browser, airflow_up, *admin(minio_settings))
    browser.get(f"{airflow_up}/plugin/tributary")
    frame = wait_for(browser, lambda d: d.find_element(By.TAG_NAME, "iframe"), "the view's frame")
    browser.switch_to.frame(frame)
    try:
        body = wait_for(
            browser,
            lambda d: (
                "Replay versions" in d.find_element(By.TAG_NAME, "body").text
                and d.find_element(By.TAG_NAME, "body").text
            ),
            "the Tributary view",
        )
        browser.screenshot("tributary_view")
    finally:
        browser.switch_to.default_content()
    assert "Serving reads:" in body
