"""`tributary sql`'s guard: a statement runs only if it reads.

A statement must start like a query or a description, and Spark's parse of it (which runs
nothing) must hold no command or insert anywhere, but for a describing command at its root.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

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
