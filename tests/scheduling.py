"""How `pytest -n N --dist loadscope` (make test) shares the suite among its workers: a module
runs whole on one worker, so its module fixtures are built once; the modules that run DAGs in
the one test Airflow run one after another on the same worker (they pause, trigger and read
its runs, and its tasks write the test state's lakehouse); so do the modules that share a
fixture built once per run. The integration groups start first, the largest (in tests) first,
and the many small unit modules fill in the end, the longest of them first: the workers
finish close together.

The controller schedules by test id alone (it collects nothing), so the groups are named here
by module path, and each worker checks at collection that every module is where its fixtures
say it must be: a new DAG test module that uses Airflow outside the group fails the run.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from xdist.scheduler import LoadScopeScheduling

AIRFLOW = "airflow"
# Modules that build on a lakehouse built once per test run, and the group they share.
SHARED_FIXTURE_GROUPS = {
    "tests/integration/test_batch_layer.py": "streamed_day",
    "tests/integration/test_reconcile.py": "streamed_day",
}


# Unit modules that each take a minute or more (micro-batches, vacuums): they start first
# among the unit modules, so that no worker is left running one alone at the end.
LONG_UNIT_MODULES = (
    "tests/unit/speed/test_micro_batch.py",
    "tests/unit/core/test_delta_maintenance.py",
    "tests/unit/transforms/test_changes.py",
    "tests/unit/cdc/test_changelog.py",
)


def uses_airflow(module: str) -> bool:
    """By name: tests/integration/test_airflow_*.py, test_*_dag.py and test_loopback_only.py
    (which checks every service, Airflow included, listens on loopback only)."""
    name = PurePosixPath(module).name
    return module.startswith("tests/integration/") and (
        name.startswith("test_airflow_")
        or name.endswith("_dag.py")
        or name == "test_loopback_only.py"
    )


def group_of(nodeid: str) -> str:
    """The work unit a test belongs to: its module's group, or its module."""
    module = nodeid.split("::", 1)[0]
    if uses_airflow(module):
        return AIRFLOW
    return SHARED_FIXTURE_GROUPS.get(module, module)


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> LoadScopeScheduling | None:
    if config.getoption("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    config.option.loadscopereorder = False  # the workers collect in our order (below)

    class ByGroup(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid)

    return ByGroup(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    check_groups(items)
    if hasattr(config, "workerinput"):  # a worker: the controller schedules in this order
        sizes = Counter(group_of(item.nodeid) for item in items)

        def rank(item: pytest.Item) -> tuple[bool, bool, int, str]:
            group = group_of(item.nodeid)
            unit = "/integration/" not in str(item.path)
            return (unit, group not in LONG_UNIT_MODULES, -sizes[group], group)

        items.sort(key=rank)


def check_groups(items: list[pytest.Item]) -> None:
    modules: dict[str, set[str]] = {}  # module -> the groups its fixtures call for
    for item in items:
        module = item.nodeid.split("::", 1)[0]
        needs = modules.setdefault(module, set())
        if "airflow_up" in item.fixturenames:
            needs.add(AIRFLOW)
        if hasattr(getattr(item, "module", None), "streamed_day"):
            needs.add("streamed_day")
    wrong = sorted(
        module
        for module, needs in modules.items()
        if len(needs) > 1 or needs != ({group_of(module)} & {AIRFLOW, "streamed_day"})
    )
    if wrong:
        raise pytest.UsageError(
            "tests/scheduling.py puts these modules in the wrong worker group (a module that "
            "uses Airflow must be in the airflow group, and only those; one that uses "
            f"tests/integration/streamed_day.py in the streamed_day group): {', '.join(wrong)}"
        )


# The time each module and each work unit took (setup, call and teardown of its tests),
# summed on the controller: the run's summary lists the longest ones and each worker's total,
# to show where `make test`'s wall time goes.
_MODULE_SECONDS: Counter[str] = Counter()
_GROUP_SECONDS: Counter[str] = Counter()
_WORKER_SECONDS: Counter[str] = Counter()
SLOWEST = 25
# A service-free module whose tests take longer than this has its slow tests marked slow (or
# itself), so that make test-fast stays an inner loop (pyproject.toml's markers); the summary
# names any module whose unmarked tests still take longer.
SLOW_MODULE_SECONDS = 20.0
_UNMARKED_SECONDS: Counter[str] = Counter()  # per module, its tests not marked slow
# A failure, and a setup, call or teardown longer than this, is printed the moment it is
# reported, with the time since the run started: a run stopped from outside (CI's time limit)
# never reaches its summary, and this is then all it leaves of what failed and what took long.
LIVE_LINE_SECONDS = 120.0
_STARTED = time.monotonic()
_TERMINAL: list[Any] = []


@pytest.hookimpl(trylast=True)  # after the terminal reporter is registered
def pytest_configure(config: pytest.Config) -> None:
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None and not hasattr(config, "workerinput"):
        _TERMINAL.append(reporter)


def live_line(report: pytest.TestReport, elapsed: float) -> str | None:
    """The line printed at once for a report: a failure, or a step longer than the limit."""
    if not report.failed and report.duration <= LIVE_LINE_SECONDS:
        return None
    what = "FAILED" if report.failed else "slow"
    minutes, seconds = divmod(int(elapsed), 60)
    return (
        f"[{minutes}:{seconds:02d}] {what} {report.when} {report.nodeid} ({report.duration:.0f} s)"
    )


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    node = getattr(report, "node", None)
    worker = getattr(getattr(node, "gateway", None), "id", "main")
    module = report.nodeid.split("::", 1)[0]
    _MODULE_SECONDS[module] += report.duration
    if "slow" not in report.keywords:
        _UNMARKED_SECONDS[module] += report.duration
    _GROUP_SECONDS[group_of(report.nodeid)] += report.duration
    _WORKER_SECONDS[worker] += report.duration
    line = live_line(report, time.monotonic() - _STARTED)
    if line and _TERMINAL:
        _TERMINAL[0].write(f"\n{line}\n")


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _GROUP_SECONDS:
        return
    write = terminalreporter.write_line
    terminalreporter.section(f"slowest {SLOWEST} modules (seconds; [its work unit])")
    for module, seconds in _MODULE_SECONDS.most_common(SLOWEST):
        group = group_of(module)
        write(f"{seconds:8.1f}  {module}" + (f"  [{group}]" if group != module else ""))
    groups = (g for g in _GROUP_SECONDS.most_common() if g[0] not in _MODULE_SECONDS)
    write("shared work units: " + ", ".join(f"{g} {s:.0f}" for g, s in groups))
    write("per worker: " + ", ".join(f"{w} {s:.0f}" for w, s in sorted(_WORKER_SECONDS.items())))
    unmarked = unmarked_slow_modules(_UNMARKED_SECONDS)
    if unmarked:
        write(
            f"service-free modules whose tests outside the slow marker took over "
            f"{SLOW_MODULE_SECONDS:.0f} s (make test-fast runs them; mark the slow ones "
            "@pytest.mark.slow): " + ", ".join(unmarked)
        )


def unmarked_slow_modules(unmarked_seconds: Counter[str]) -> list[str]:
    """The service-free modules whose tests not marked slow took longer than the limit."""
    return sorted(
        module
        for module, total in unmarked_seconds.items()
        if total > SLOW_MODULE_SECONDS and not module.startswith("tests/integration/")
    )
