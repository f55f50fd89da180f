"""The automatic chain `make demo` unpauses is the one docs/operations.md names, and every
DAG in it exists."""

from __future__ import annotations

import re

from infra.services.__main__ import CHAIN
from lakehouse.core.paths import REPO_ROOT


def test_the_chain_is_the_documented_one_and_each_dag_exists() -> None:
    text = (REPO_ROOT / "docs" / "operations.md").read_text()
    paragraph = text[text.index("**The automatic chain**") :].split("\n\n")[0]
    named = re.findall(r"`(\w+)`", paragraph.split("`promote_version`")[0])
    assert set(CHAIN) == set(named), (CHAIN, named)
    for dag_id in CHAIN:
        assert (REPO_ROOT / "dags" / f"{dag_id}.py").is_file(), dag_id
