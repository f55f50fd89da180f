"""Headless Chromium for the tests that use a page as a user would: Debian's chromium, driven by
Selenium through Debian's chromedriver (`make setup` installs both; no driver or browser is
ever downloaded). The `browser` fixture (tests/integration/conftest.py) yields a `Browser`; the
helpers here log in to the Airflow UI and open a DAG's trigger form by what a user sees: labels,
button texts, roles."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar
from urllib.parse import unquote, urlparse

import pytest
from selenium import webdriver
from selenium.common.exceptions import (
    StaleElementReferenceException,
    TimeoutException,
    WebDriverException,
)
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import WebDriverWait

from lakehouse.core.paths import REPO_ROOT

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
WINDOW_SIZE = (1400, 1000)
ARTIFACTS = REPO_ROOT / "tests" / "artifacts"
SCREENSHOTS = ARTIFACTS / "screenshots"
UI_TIMEOUT = 30.0
# The machine's network is closed: without the background-networking flags Chromium keeps
# opening connections to Google's hosts, which are refused. --no-sandbox because tests run as
# root; --disable-dev-shm-usage because containers often have a tiny /dev/shm.
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
)

T = TypeVar("T")


class Browser(webdriver.Chrome):
    """A headless Chromium WebDriver that can keep screenshots as test artifacts."""

    def screenshot(self, name: str) -> Path:
        """Save the visible page as tests/artifacts/screenshots/<name>.png; its path."""
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        path = SCREENSHOTS / f"{re.sub(r'[^A-Za-z0-9_.-]+', '_', name)}.png"
        assert self.save_screenshot(str(path)), f"could not save the screenshot {path}"
        return path


def missing_browser() -> str | None:
    """Why the browser tests cannot run here, or None."""
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
    if missing:
        return (
            f"{' and '.join(missing)} not installed: run `make setup` "
            "(its browser step installs Debian's chromium and chromium-driver)"
        )
    return None


def start_browser(workdir: Path) -> Browser:
    """Headless Chromium with a new, empty profile in `workdir` (and ChromeDriver's log there);
    fails the test (never skips it) when Chromium or ChromeDriver is missing or does not start."""
    problem = missing_browser()
    if problem:
        pytest.fail(problem)
    # Selenium Manager is skipped when the driver's path is given; SE_OFFLINE makes sure that
    # nothing is ever fetched even if it ran.
    os.environ.setdefault("SE_OFFLINE", "true")
    workdir.mkdir(parents=True, exist_ok=True)
    options = Options()
    options.binary_location = str(CHROMIUM)
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--window-size={WINDOW_SIZE[0]},{WINDOW_SIZE[1]}")
    options.add_argument(f"--user-data-dir={workdir / 'profile'}")
    log = workdir / "chromedriver.log"
    service = Service(executable_path=str(CHROMEDRIVER), log_output=str(log))
    try:
        return Browser(service=service, options=options)
    except WebDriverException as err:
        pytest.fail(f"headless Chromium did not start: {err.msg}; ChromeDriver's log: {log}")


def wait_for(
    driver: WebDriver,
    condition: Callable[[WebDriver], T | None],
    what: str,
    timeout: float = UI_TIMEOUT,
) -> T:
    """Poll `condition` until it returns something truthy (re-rendered elements are retried);
    fail after `timeout` seconds, saying what was awaited and where the browser was."""
    wait = WebDriverWait(
        driver, timeout, poll_frequency=0.2, ignored_exceptions=(StaleElementReferenceException,)
    )
    try:
        found: T = wait.until(condition)  # type: ignore[assignment]  # until() skips None
    except TimeoutException:
        raise AssertionError(
            f"timed out after {timeout:.0f} s waiting for {what}; the browser is at "
            f"{driver.current_url}"
        ) from None
    return found


def visible(within: WebDriver | WebElement, by: str, value: str) -> WebElement | None:
    """The first displayed element that matches, if any."""
    return next((e for e in within.find_elements(by, value) if e.is_displayed()), None)


def xpath_text(text: str) -> str:
    """`text` as an XPath string literal (it may contain quotes)."""
    if "'" not in text:
        return f"'{text}'"
    return "concat('" + "', \"'\", '".join(text.split("'")) + "')"


def button(text: str) -> str:
    """XPath of a button (element or role) whose visible text is `text`."""
    return f".//*[(self::button or @role='button') and normalize-space()={xpath_text(text)}]"


# --- Airflow UI ------------------------------------------------------------------------------


def submit_login(driver: WebDriver, url: str, user: str, password: str) -> None:
    """Open the DAG list, which sends a visitor to the login form ({url}/auth/login?next=...),
    fill the form in and press Sign in."""
    driver.get(f"{url}/dags")
    username = wait_for(driver, lambda d: visible(d, By.NAME, "username"), "the Airflow login form")
    username.clear()
    username.send_keys(user)
    password_field = driver.find_element(By.NAME, "password")
    password_field.clear()
    password_field.send_keys(password)
    driver.find_element(By.XPATH, button("Sign in")).click()


def text_of(element: WebElement) -> str:
    """The element's text. Chromium may report an element the page re-rendered meanwhile as
    an inspector error ("Node with given id does not belong to the document") rather than a
    stale reference: it is raised as one, which wait_for retries."""
    try:
        return element.text
    except WebDriverException as err:
        if "does not belong to the document" in (err.msg or ""):
            raise StaleElementReferenceException(err.msg) from err
        raise


def login_error(driver: WebDriver) -> str | None:
    """The error the login form shows (such as '401 Unauthorized Invalid credentials')."""
    for alert in driver.find_elements(By.CSS_SELECTOR, ".chakra-alert__root"):
        text = " ".join(text_of(alert).split())
        # The form always carries a notice that the simple auth manager is on.
        if text and not text.startswith("Simple auth manager"):
            return text
    return None


def shown_dag_ids(driver: WebDriver) -> list[str]:
    """The DAG ids the DAG list shows (its first page)."""
    return [text_of(e) for e in driver.find_elements(By.CSS_SELECTOR, "a[data-testid='dag-id']")]


def airflow_login(driver: WebDriver, url: str, user: str, password: str) -> list[str]:
    """Log in to the Airflow 3 UI (simple auth manager) and wait until the DAG list is shown;
    the DAG ids it shows. Fails with the form's error if the login is refused."""
    started = time.monotonic()
    submit_login(driver, url, user, password)
    outcome = wait_for(
        driver,
        lambda d: login_error(d) or "/auth/login" not in d.current_url,
        "the login to be accepted or refused",
    )
    if isinstance(outcome, str):
        raise AssertionError(f"the Airflow UI refused the login as {user!r}: {outcome}")
    if urlparse(driver.current_url).path.rstrip("/") != "/dags":
        driver.get(f"{url}/dags")
    remaining = max(UI_TIMEOUT - (time.monotonic() - started), 5.0)
    return wait_for(driver, shown_dag_ids, "the DAG list", timeout=remaining)


def open_trigger_form(driver: WebDriver, url: str, dag_id: str) -> WebElement:
    """Open the DAG's page and its Trigger form (the React UI's dialog); the dialog, once its
    fields are shown. Fill it in with `form_field`/`fill_field`, send it with
    `submit_trigger_form`."""
    driver.get(f"{url}/dags/{dag_id}")
    trigger = wait_for(
        driver, lambda d: visible(d, By.XPATH, button("Trigger")), f"{dag_id}'s Trigger button"
    )
    trigger.click()
    heading = f"Trigger Dag - {dag_id}"
    form = wait_for(
        driver,
        lambda d: visible(
            d, By.XPATH, f"//*[@role='dialog'][.//*[normalize-space()={xpath_text(heading)}]]"
        ),
        f"the '{heading}' form",
    )
    # The form is complete once its last section is drawn; then every parameter is a field.
    wait_for(driver, lambda d: visible(form, By.XPATH, button("Advanced Options")), "the form")
    wait_for(
        driver,
        lambda d: (
            not form.find_elements(By.XPATH, button("Run Parameters"))
            or any(e.is_displayed() for e in form.find_elements(By.CSS_SELECTOR, "input[id]"))
        ),
        "the form's parameter fields",
    )
    return form


def form_field(form: WebElement, label: str, timeout: float = UI_TIMEOUT) -> WebElement:
    """The input a field's label (its visible text, without the required '*') points to, or
    (a field that may be empty names no input) the one input of the label's field. The form
    draws its fields anew as they change, so both are looked up until they are there."""
    driver = form.parent

    def field(d: WebDriver) -> WebElement | None:
        found = visible(form, By.XPATH, f".//label[normalize-space(text())={xpath_text(label)}]")
        if found is None:
            return None
        inputs = d.find_elements(By.ID, found.get_attribute("for") or "") or found.find_elements(
            By.XPATH,
            "./ancestor::*[@data-part='root'][1]//*[self::input or self::textarea]"
            "[not(@type='hidden')]",
        )
        return inputs[0] if inputs else None

    return wait_for(driver, field, f"a field labelled {label!r}", timeout)


def fill_field(form: WebElement, label: str, value: str) -> WebElement:
    """Type `value` into a text or number field in place of what it holds, as a user would
    (select all, type, tab away); the field."""
    field = form_field(form, label)
    field.click()
    field.send_keys(Keys.CONTROL, "a")
    field.send_keys(value)
    field.send_keys(Keys.TAB)
    shown = field.get_attribute("value")
    assert shown == value, f"the field {label!r} shows {shown!r} after typing {value!r}"
    return field


def submit_trigger_form(driver: WebDriver, form: WebElement, dag_id: str) -> str:
    """Press the form's Trigger button; the new run's id, from the run page the UI opens."""
    form.find_element(By.XPATH, button("Trigger")).click()
    prefix = f"/dags/{dag_id}/runs/"

    def run_page(d: WebDriver) -> str | None:
        path = urlparse(d.current_url).path
        return unquote(path[len(prefix) :].split("/")[0]) if path.startswith(prefix) else None

    try:
        return wait_for(driver, run_page, f"the page of the new {dag_id} run")
    except AssertionError as err:
        try:
            shown = form.text
        except StaleElementReferenceException:
            shown = "(the form is gone)"
        raise AssertionError(f"{err}; the form says:\n{shown}") from None
