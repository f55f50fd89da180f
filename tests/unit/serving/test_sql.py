"""`tributary sql`'s first guard, before Spark starts: a statement must start like a query."""

from __future__ import annotations

import re

import pytest

from lakehouse.serving.sql import StatementRefused, check_starts_like_a_query, statement_failed


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


def test_a_failed_statement_says_spark_s_first_line_and_the_views_it_may_read() -> None:
    err = ValueError("[TABLE_OR_VIEW_NOT_FOUND] no `t`.\n  at line 1\n")
    said = statement_failed(err, ["serving_a", "serving_b"])
    assert said == "[TABLE_OR_VIEW_NOT_FOUND] no `t`.\n-- views: serving_a, serving_b"
    assert statement_failed(err, []).endswith("-- views: none yet")
