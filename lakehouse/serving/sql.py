"""`tributary sql`'s guard: a statement runs only if it reads.

A statement must start like a query or a description, and Spark's parse of it (which runs
nothing) must hold no command or insert anywhere, but for a describing command at its root.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from lakehouse.core.config import Settings

# `tributary sql` only reads: statements that start like a query or a description...
READ_ONLY_KEYWORDS = (
    "SELECT",
    "WITH",
    "VALUES",
    "TABLE",
    "FROM",
    "SHOW",
    "DESC",
    "DESCRIBE",
    "EXPLAIN",
)
# ...and whose parsed plan holds no command or insert, but for these (class names' starts),
# which only describe: `WITH ... INSERT` and `FROM t INSERT ...` start like queries.
DESCRIBING_COMMANDS = ("Show", "Describe", "Explain")
LEADING_NOISE = re.compile(r"(\s+|\(|--[^\n]*|/\*.*?\*/)*", re.DOTALL)


def first_keyword(statement: str) -> str:
    match = LEADING_NOISE.match(statement)
    word = re.match(r"[A-Za-z]+", statement[match.end() if match else 0 :])
    return word.group().upper() if word else ""


def writes(spark: SparkSession, statement: str) -> bool:
    """Whether Spark's parse of `statement` (which runs nothing) holds a command or an
    insert anywhere, other than a describing command at its root."""
    from py4j.protocol import Py4JJavaError
    from pyspark.errors.exceptions.captured import convert_exception

    jvm = spark._jvm
    assert jvm is not None
    try:
        plan = spark._jsparkSession.sessionState().sqlParser().parsePlan(statement)
    except Py4JJavaError as err:  # as spark.sql() would raise it: a ParseException
        raise convert_exception(err.java_exception) from None
    if plan.getClass().getSimpleName().startswith(DESCRIBING_COMMANDS):
        return False
    command = jvm.java.lang.Class.forName("org.apache.spark.sql.catalyst.plans.logical.Command")
    nodes = [plan]
    while nodes:
        node = nodes.pop()
        if command.isInstance(node) or node.getClass().getSimpleName().startswith("Insert"):
            return True
        children = node.children()
        nodes += [children.apply(i) for i in range(children.size())]
    return False


class StatementRefused(ValueError):
    """The statement would write, does not start like a query, or Spark refused it (its
    parse or its names): nothing was run."""


REFUSED = (
    "a read-only command: it runs queries and descriptions (starting with "
    f"{', '.join(READ_ONLY_KEYWORDS)}) that write nothing; nothing was run"
)


def check_starts_like_a_query(statement: str) -> None:
    """Refuse (StatementRefused) what does not start like a query, before Spark starts."""
    import difflib

    keyword = first_keyword(statement)
    if keyword in READ_ONLY_KEYWORDS:
        return
    # A typo of a query's first word is not an attempt to write: say which word it was.
    meant = difflib.get_close_matches(keyword, READ_ONLY_KEYWORDS, n=1, cutoff=0.75)
    if meant:
        raise StatementRefused(
            f"{keyword} does not start a query: did you mean {meant[0]}? Nothing was run"
        )
    raise StatementRefused(REFUSED)


@dataclass(frozen=True)
class ServingQuery:
    result: DataFrame  # lazy: Spark raises what the statement gets wrong when it runs
    registered: list[str]  # serving_<view> names the statement may read
    missing: list[str]  # views with no results yet


def query_serving_views(spark: SparkSession, settings: Settings, statement: str) -> ServingQuery:
    """Spark SQL over the serving views, registered as `serving_<view>`. Read-only: raises
    StatementRefused for a statement that would write, before running anything."""
    from pyspark.errors import PySparkException

    from lakehouse.serving.serve import register_serving_views

    check_starts_like_a_query(statement)
    # Otherwise a keyword where a name may stand is taken for one: "... FROM v WHERE" (a
    # condition left out) ran unfiltered, WHERE read as an alias of v.
    spark.conf.set("spark.sql.ansi.enforceReservedKeywords", "true")
    registered, missing = register_serving_views(spark, settings)
    try:
        if writes(spark, statement):
            raise StatementRefused(REFUSED)
        return ServingQuery(spark.sql(statement), registered, missing)
    except PySparkException as err:  # the statement's fault: a parse or an unknown name
        raise StatementRefused(statement_failed(err, registered)) from None


def statement_failed(err: Exception, registered: list[str]) -> str:
    """What Spark said of a statement that failed, and the views it may read."""
    first = (str(err).strip().splitlines() or [type(err).__name__])[0]
    return f"{first}\n-- views: {', '.join(registered) or 'none yet'}"
