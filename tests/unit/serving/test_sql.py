"""`tributary sql`'s first guard, before Spark starts: a statement must start like a query."""

from __future__ import annotations

import re

import pytest

from lakehouse.serving.sql import StatementRefused, check_starts_like_a_query


@pytest.mark.parametrize(
    "statement",
    ["SELECT 1", "  -- a note\n(select 1)", "/* why */ WITH a AS (SELECT 1) SELECT * FROM a"],
)
def test_a_statement_that_starts_like_a_query_passes(statement: str) -> None:
    check_starts_like_a_query(statement)


@pytest.mark.parametrize(
    ("statement", "said"),
    [
        ("SELEC 1", "SELEC does not start a query: did you mean SELECT? Nothing was run"),
        ("DROP TABLE t", "a read-only command"),
        ("", "a read-only command"),
    ],
)
def test_anything_else_is_refused_with_what_was_meant_if_it_is_a_typo(
    statement: str, said: str
) -> None:
    with pytest.raises(StatementRefused, match=re.escape(said)):
        check_starts_like_a_query(statement)
