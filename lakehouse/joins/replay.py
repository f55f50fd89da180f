"""A replay version's joins, by the streams' own code: the commerce stream replayed from offset
0 of its topics into the version's order events, payments and order state, then the windowed
stream-stream joins over the version's tables (its events from jobs.replay), each judged as
the live ones are.

    replay_<version>.events                    (jobs.replay)
    commerce topics, from offset 0 -> replay_<version>.order_events, .payments, .order_state
    those -> replay_<version>.purchase_attribution, .order_payments, .join_progress

Both run as available-now streams with checkpoints of their own, so a second run continues
with what the log and the version's events gained since. The judges: each windowed join
against the batch join of its on-time input rows (lakehouse.joins.windowed_reconcile), and the
order state the commerce replay folded batch by batch against the batch fold of the version's
own order events (lakehouse.transforms.commerce.fold_log).

The version's enrichment (`enrich_version`, jobs.enrich_replay) enriches its events into
replay_<version>.events_enriched and .revenue_by_segment, is judged as the live stream is, and
its verdict recorded for kappa serving (lakehouse.joins.checks).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lakehouse.commerce.outputs import CommerceOutputs
from lakehouse.core.config import Settings
from lakehouse.core.delta_io import read_table, table_exists
from lakehouse.core.locks import exclusive_writer
from lakehouse.core.storage import StorageError
from lakehouse.joins.reconcile import EnrichmentReconciliation
from lakehouse.joins.windowed import queries_of, run_joins
from lakehouse.joins.windowed_reconcile import JoinVerdict, reconcile_windowed_joins

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

EXAMPLES = 5


@dataclass(frozen=True)
class ReplayedJoins:
    version: str
    orders: int  # orders in the version's order state
    state_differing: int  # orders whose state differs from the batch fold of its events
    state_examples: tuple[str, ...]
    verdicts: tuple[JoinVerdict, ...]

    @property
    def judged(self) -> tuple[JoinVerdict, ...]:
        """The joins that ran a batch (a join whose inputs the version lacks runs none)."""
        return tuple(v for v in self.verdicts if v.batch_id is not None)

    @property
    def equal(self) -> bool:
        return self.state_differing == 0 and all(v.equal for v in self.judged)

    def result(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "equal": self.equal,
            "order_state": {"orders": self.orders, "differing": self.state_differing},
            "joins": {
                v.query: {
                    "batch_id": v.batch_id,
                    "compared": v.compared,
                    "differing": v.differing,
                    "not_emitted_for_late": v.not_emitted_for_late,
                    "open_orders": v.open_orders,
                }
                for v in self.verdicts
            },
            "failures": [
                *self.state_examples,
                *(f"{v.query}: {e}" for v in self.judged if not v.equal for e in v.examples),
            ],
        }


def replay_joins(
    spark: SparkSession,
    settings: Settings,
    version: str,
    stop_file: Path,
    say: Callable[[str], None],
) -> ReplayedJoins:
    """Replay the commerce stream and the windowed joins into `version` and judge them.
    StorageError when the version has no events (jobs.replay writes them first);
    QueryFailedError when a query stops on an error (run again to resume)."""
    from lakehouse.commerce.rebuild import replay_commerce

    queries = queries_of(version)
    events = queries[0].left.source
    if not table_exists(spark, events, settings):
        raise StorageError(
            f"no {events.name} at {events.path(settings)}: replay {version} first (jobs.replay)"
        )
    say(f"==> {version}: the commerce stream from offset 0 of its topics")
    commerce = replay_commerce(spark, settings, version)
    say(f"==> {version}: the windowed joins over its tables")
    run_joins(settings, stop_file, True, say, queries)
    orders, differing, examples = judge_state(spark, settings, commerce)
    return ReplayedJoins(
        version,
        orders,
        differing,
        examples,
        tuple(reconcile_windowed_joins(spark, settings, queries)),
    )


def enrich_version(
    settings: Settings, version: str, stop_file: Path, say: Callable[[str], None]
) -> EnrichmentReconciliation:
    """Enrich `version`'s events by the enrichment stream's code (available-now: what they
    hold now), judge the result and record the verdict (lakehouse.joins.checks), which kappa
    serving reads the version's revenue by. Raises what run_enrichment and
    reconcile_enrichment raise."""
    from lakehouse.core.small_tables import table_version
    from lakehouse.core.spark import get_spark_checked
    from lakehouse.joins.checks import record_check
    from lakehouse.joins.outputs import EnrichmentOutputs
    from lakehouse.joins.reconcile import reconcile_enrichment
    from lakehouse.joins.stream import run_enrichment

    outputs = EnrichmentOutputs.replay(version)
    # Before the run: an available-now run reads at least up to the version it starts at.
    events_version = table_version(settings, outputs.events)
    run_enrichment(settings, stop_file, True, say, outputs)
    spark = get_spark_checked("enrich_replay", settings)
    with exclusive_writer(settings, outputs.writer, wait_seconds=60):
        judged = reconcile_enrichment(spark, settings, outputs)
        if events_version is not None:
            record_check(spark, settings, outputs, judged, events_version)
    return judged


def judge_state(
    spark: SparkSession, settings: Settings, outputs: CommerceOutputs
) -> tuple[int, int, tuple[str, ...]]:
    """(orders in the state, orders that differ from the batch fold of the order events,
    the first of them): the fold batch by batch against the fold of the whole log."""
    from lakehouse.commerce.rebuild import differing_orders, state_differences
    from lakehouse.transforms.commerce import fold_log, state_rows

    if not table_exists(spark, outputs.state, settings):
        return 0, 0, ()
    state = read_table(spark, outputs.state, settings)
    folded = state_rows(fold_log(read_table(spark, outputs.order_events, settings)))
    differences = state_differences(state, folded).localCheckpoint()
    differing, examples = differing_orders(differences, EXAMPLES)
    return state.count(), differing, tuple(f"order_state {e}" for e in examples)
