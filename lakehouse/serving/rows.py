"""Rows of an answer as text, for a terminal: a table or CSV, at most so many."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import DataFrame


@dataclass(frozen=True)
class ShownRows:
    text: str  # ends with a newline
    shown: int
    more: bool  # the answer had more rows than were shown

    def note(self) -> str:
        return f"{self.shown} rows" + (" (more rows: raise --limit)" if self.more else "")


def rows_as_text(df: DataFrame, limit: int, form: str) -> ShownRows:
    """At most `limit` rows of `df` as an aligned table (`form` "table") or CSV ("csv")."""
    rows = cast("pd.DataFrame", df.limit(limit + 1).toPandas())
    shown = rows.head(limit)
    if form == "csv":
        text = shown.to_csv(index=False)
    else:
        text = (shown.to_string(index=False) if len(shown) else "(no rows)") + "\n"
    return ShownRows(text, len(shown), len(rows) > limit)
