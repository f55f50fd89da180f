"""The accounting invariant over a speed layer's output: every record consumed from the log
is in silver, in quarantine, or counted as a duplicate of an event already in silver (and a
conflicting duplicate, counted so, is also quarantined to show what it said)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from lakehouse.core.config import Settings
from lakehouse.speed.outputs import SpeedOutputs

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass(frozen=True)
class Accounting:
    consumed: int  # records the stream read, by its progress rows
    silver: int
    quarantined: int
    duplicates: int
    late: int  # silver events that also went to the late table (not a fourth outcome)
    conflicting: int = 0  # duplicates that are also quarantined (not a fourth outcome)

    @property
    def balanced(self) -> bool:
        return self.consumed == self.silver + self.quarantined + self.duplicates - self.conflicting


def account(spark: SparkSession, settings: Settings, outputs: SpeedOutputs) -> Accounting:
    """The outputs' counts as they are now (the stream may be running: read it between
    batches for a balance that holds)."""
    from pyspark.sql import functions as F

    def rows(name: str) -> int:
        return int(spark.read.format("delta").load(getattr(outputs, name).path(settings)).count())

    progress = spark.read.format("delta").load(outputs.progress.path(settings))
    # A progress table written before conflicts were counted has no such column.
    counted = [
        c for c in ("input_rows", "duplicates", "conflicting_duplicates") if c in progress.columns
    ]
    totals = progress.agg(*(F.sum(c).alias(c) for c in counted)).first()
    assert totals is not None
    return Accounting(
        consumed=int(totals["input_rows"] or 0),
        silver=rows("silver"),
        quarantined=rows("quarantine"),
        duplicates=int(totals["duplicates"] or 0),
        late=rows("late"),
        conflicting=int(totals.asDict().get("conflicting_duplicates") or 0),
    )


def quarantine_reasons(
    spark: SparkSession, settings: Settings, outputs: SpeedOutputs
) -> list[tuple[str, int]]:
    """Each quarantine reason (the broken rules, without the details a reason may add, such
    as a conflict's first delivery) and its records, the most common first."""
    from pyspark.sql import functions as F

    counted = (
        spark.read.format("delta")
        .load(outputs.quarantine.path(settings))
        .groupBy(F.array_join("reasons", "; ").alias("reason"))
        .count()
        .orderBy(F.desc("count"), "reason")
        .collect()
    )
    return [(str(r["reason"]), int(r["count"])) for r in counted]
