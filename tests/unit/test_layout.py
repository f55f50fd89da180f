"""The layout's rules, read from the source: the library never reaches up into the entry points,
the DAGs or the installers; a job imports no other job; benches drive the library, not CLIs."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).parents[2]
# What a job may import from jobs/: the argument types, the parser, the exit contract, the
# stream jobs' shared entry point and the batch jobs' shared request.
JOB_HELPERS = frozenset(
    {"jobs.arguments", "jobs.contract", "jobs.parser", "jobs.stream_job", "jobs.batch_interval"}
)
# A job too long for one file keeps its parts beside it, imported by that job alone.
JOB_PARTS = {"jobs/cli.py": frozenset({"jobs.cli_commands", "jobs.cli_cdc", "jobs.cli_joins"})}


def imports(path: Path) -> Iterator[tuple[int, str]]:
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.lineno, node.module
        elif isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)


def found(
    folder: str,
    forbidden: tuple[str, ...],
    allowed: frozenset[str] = frozenset(),
    allowed_in: dict[str, frozenset[str]] | None = None,
) -> list[str]:
    """Imports of `forbidden` packages in `folder`, but for `allowed` ones and, in a file of
    `allowed_in`, the ones it lists."""
    found = []
    for path in sorted((REPO / folder).rglob("*.py")):
        own = str(path.relative_to(REPO))
        also = (allowed_in or {}).get(own, frozenset())
        found += [
            f"{own}:{line} imports {name}"
            for line, name in imports(path)
            if name.split(".")[0] in forbidden and name not in allowed | also
        ]
    return found


def test_the_library_imports_no_entry_point_dag_or_installer() -> None:
    assert found("lakehouse", ("jobs", "dags", "infra")) == []


def test_a_job_imports_no_other_job() -> None:
    assert found("jobs", ("jobs", "dags", "infra"), JOB_HELPERS, JOB_PARTS) == []


@pytest.mark.parametrize("folder", ["bench", "dags/support"])
def test_benches_and_dag_glue_drive_the_library_not_the_command_lines(folder: str) -> None:
    assert found(folder, ("jobs",), frozenset({"jobs.contract"})) == []


def test_every_library_package_is_a_package_and_its_init_has_no_side_effects() -> None:
    for init in sorted((REPO / "lakehouse").rglob("__init__.py")):
        body = ast.parse(init.read_text()).body
        kinds = {type(node) for node in body}
        assert kinds <= {ast.Expr, ast.ImportFrom, ast.Assign}, f"{init}: only imports and names"


def test_the_long_unit_modules_the_scheduler_starts_first_exist() -> None:
    from tests.scheduling import LONG_UNIT_MODULES

    assert [m for m in LONG_UNIT_MODULES if not (REPO / m).is_file()] == []


def test_the_long_unit_modules_are_left_out_of_the_inner_loop() -> None:
    from tests.scheduling import LONG_UNIT_MODULES

    marked = "pytestmark = pytest.mark.slow"
    assert [m for m in LONG_UNIT_MODULES if marked not in (REPO / m).read_text()] == []


def test_the_summary_names_the_service_free_modules_whose_unmarked_tests_are_long() -> None:
    from collections import Counter

    from tests.scheduling import SLOW_MODULE_SECONDS, unmarked_slow_modules

    over, under = SLOW_MODULE_SECONDS + 1, SLOW_MODULE_SECONDS - 1
    unmarked_seconds = Counter(
        {
            "tests/unit/a/test_long.py": over,
            "tests/unit/a/test_short.py": under,
            "tests/dags/test_long.py": over,
            "tests/integration/test_long.py": over * 10,
        }
    )
    assert unmarked_slow_modules(unmarked_seconds) == [
        "tests/dags/test_long.py",
        "tests/unit/a/test_long.py",
    ]


def test_every_job_is_a_thin_entry_point() -> None:
    """Parse the arguments, call the library, print, return an exit status: a job longer than
    this holds work that belongs to the library."""
    longer = {
        str(path.relative_to(REPO)): lines
        for path in sorted((REPO / "jobs").glob("*.py"))
        if (lines := len(path.read_text().splitlines())) > 150
    }
    assert longer == {}


def test_a_failure_or_a_long_step_is_printed_at_once_with_the_time_since_the_start() -> None:
    from tests.scheduling import LIVE_LINE_SECONDS, live_line

    def report(outcome: str, duration: float) -> pytest.TestReport:
        return pytest.TestReport(
            "tests/x.py::t", ("x", 1, "t"), {}, outcome, None, "call", [], duration
        )

    assert live_line(report("passed", LIVE_LINE_SECONDS - 1), 10) is None
    assert live_line(report("failed", 1.0), 3725) == "[62:05] FAILED call tests/x.py::t (1 s)"
    long = live_line(report("passed", LIVE_LINE_SECONDS + 1), 61)
    assert long == f"[1:01] slow call tests/x.py::t ({LIVE_LINE_SECONDS + 1:.0f} s)"
