"""Every DAG file parses, is named after its DAG, and keeps Spark out of the parser.

Airflow's DAG processor imports each file every few seconds; an import error hides the DAG,
and a top-level pyspark import slows every parse (and breaks on workers without Spark)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from lakehouse.core.paths import REPO_ROOT

if TYPE_CHECKING:
    from airflow.dag_processing.dagbag import DagBag

DAGS_FOLDER = REPO_ROOT / "dags"
# Every .py file at the top of the folder is a DAG; their shared helpers are in dags/support/,
# which .airflowignore keeps Airflow from parsing.
DAG_FILES = sorted(DAGS_FOLDER.glob("*.py"))


@pytest.fixture(scope="module")
def dagbag(airflow_home: Path) -> DagBag:
    # Imported here, after airflow_home has pointed Airflow at a throwaway home.
    from airflow.dag_processing.dagbag import DagBag

    # safe_mode=False: parse every file, not only those mentioning "airflow" and "dag".
    return DagBag(dag_folder=DAGS_FOLDER, safe_mode=False)


def test_dags_folder_is_not_empty() -> None:
    assert DAG_FILES, f"no DAG files in {DAGS_FOLDER}"


def test_airflow_parses_the_dag_files_and_nothing_else(dagbag: DagBag) -> None:
    parsed = sorted(Path(stat.file).name for stat in dagbag.dagbag_stats)
    assert parsed == sorted(p.name for p in DAG_FILES), "dags/.airflowignore lists dags/support/"


def test_no_import_errors(dagbag: DagBag) -> None:
    errors = "\n\n".join(f"{path}:\n{err}" for path, err in dagbag.import_errors.items())
    assert not dagbag.import_errors, f"DAG files failed to import:\n{errors}"


@pytest.mark.parametrize("path", DAG_FILES, ids=lambda p: p.name)
def test_file_defines_the_dag_named_after_it(dagbag: DagBag, path: Path) -> None:
    found = sorted(d.dag_id for d in dagbag.dags.values() if Path(d.fileloc) == path)
    assert found == [path.stem], f"{path.name} defines DAGs {found}; expected only {path.stem!r}"


def test_every_dag_id_is_its_file_name(dagbag: DagBag) -> None:
    wrong = {d.dag_id: d.fileloc for d in dagbag.dags.values() if Path(d.fileloc).stem != d.dag_id}
    assert not wrong, f"dag_id must equal the file name: {wrong}"


@pytest.mark.parametrize("path", DAG_FILES, ids=lambda p: p.name)
def test_a_dag_with_parameters_refuses_names_it_does_not_declare(
    dagbag: DagBag, path: Path
) -> None:
    """Airflow keeps an unknown conf key as one more parameter: a misspelt one would be
    ignored unless a task checks (dags.support.run_params)."""
    [dag] = [d for d in dagbag.dags.values() if Path(d.fileloc) == path]
    source = path.read_text()
    if "supervised_stream_dag(" in source:  # the DAG's tasks are the factory's
        source += (DAGS_FOLDER / "support" / "stream_dag.py").read_text()
    if dag.params:
        assert "checked_params(" in source, f"{path.name} never calls checked_params"


def test_no_form_field_asks_for_a_regex_or_offers_a_bare_null(dagbag: DagBag) -> None:
    """The trigger forms: a regex is no message for a person (the jobs check names and say
    what is wrong in words), and an empty choice must read as what it means."""
    fields = [
        (dag.dag_id, name, dag.params.get_param(name).schema)
        for dag in dagbag.dags.values()
        for name in dag.params
    ]
    assert len(fields) > 20, "every DAG's fields"
    for dag_id, name, schema in fields:
        assert "pattern" not in schema, f"{dag_id}.{name}: a regex the form would show"
        if None in schema.get("enum", []):
            labels = schema.get("values_display") or {}
            assert None in labels, f"{dag_id}.{name}: an empty choice shown as 'null'"


@pytest.mark.parametrize("path", DAG_FILES, ids=lambda p: p.name)
def test_no_top_level_pyspark_import(path: Path) -> None:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = [
        f"line {line}: {name}"
        for line, name in _import_time_imports(list(tree.body))
        if name == "pyspark" or name.startswith("pyspark.")
    ]
    assert not found, (
        f"{path.name} imports pyspark when parsed ({', '.join(found)}); "
        "import it inside the task, or better, submit a job from jobs/"
    )


def _import_time_imports(body: list[ast.AST]) -> Iterator[tuple[int, str]]:
    """Modules imported while the file is executed: everything outside function bodies."""
    for node in body:
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue  # runs when the task runs, not when the DAG is parsed
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            yield from _import_time_imports(list(node.orelse))
        else:
            for field in ("body", "orelse", "finalbody", "handlers"):
                children = getattr(node, field, None)
                if isinstance(children, list):
                    yield from _import_time_imports(children)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


@pytest.mark.parametrize("path", DAG_FILES, ids=lambda p: p.name)
def test_a_dag_reads_jobs_only_through_their_contract(path: Path) -> None:
    """A DAG runs a job as a process (dags.support.job_runner) and reads its outcome with
    jobs.contract: importing a job module would import pyspark into the worker."""
    tree = ast.parse(path.read_text(), filename=str(path))
    imported = {
        node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module
    } | {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    }
    jobs = sorted(m for m in imported if m == "jobs" or m.startswith("jobs."))
    assert set(jobs) <= {"jobs.contract"}, f"{path.name} imports {jobs}"
