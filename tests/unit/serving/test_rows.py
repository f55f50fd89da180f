"""An answer's rows as text for the terminal: a table or CSV, at most the limit, saying so."""

from __future__ import annotations

from datetime import UTC, datetime

from lakehouse.serving.rows import rows_as_text
from lakehouse.serving.serve import Coverage


def test_rows_beyond_the_limit_are_left_out_and_the_note_says_so(spark) -> None:
    df = spark.createDataFrame([(i, f"p{i}") for i in range(3)], "n int, page string")
    two = rows_as_text(df.orderBy("n"), 2, "csv")
    assert (two.text, two.shown, two.more) == ("n,page\n0,p0\n1,p1\n", 2, True)
    assert two.note() == "2 rows (more rows: raise --limit)"
    every = rows_as_text(df.orderBy("n"), 3, "table")
    assert every.text.splitlines()[0].split() == ["n", "page"]
    assert (every.shown, every.note()) == (3, "3 rows")
    none = rows_as_text(df.limit(0), 5, "table")
    assert (none.text, none.note()) == ("(no rows)\n", "0 rows")


def test_the_seam_names_where_batch_results_end() -> None:
    hour = datetime(2026, 3, 1, 12, tzinfo=UTC)
    assert Coverage([(hour.replace(hour=10), hour)], 4).seam() == (
        "batch results up to 2026-03-01 12:00:00Z (batch version 4), speed results after"
    )
    assert Coverage([], None).seam() == "no batch run yet: all speed results"


def test_in_kappa_mode_the_seam_names_the_active_version() -> None:
    hour = datetime(2026, 3, 1, 12, tzinfo=UTC)
    assert Coverage([(hour.replace(hour=10), hour)], None, "replay_v2").seam() == (
        "replay_v2 results up to 2026-03-01 12:00:00Z, speed results after"
    )
    assert (
        Coverage([], None, "replay_v2").seam() == "nothing replay_v2 covers yet: all speed results"
    )
    assert Coverage([], None, "live").seam() == "no replay version is active: all speed results"
