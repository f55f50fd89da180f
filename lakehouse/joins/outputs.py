"""Where an enrichment run reads its events and writes its tables: the live stream's
(silver.events -> silver.events_enriched, ...) or a replay version's (replay_<version>.events,
the kappa replay's silver, -> replay_<version>.events_enriched, ...). The same processor and
judge run over either, so a replay enriches with the stream's own code."""

from __future__ import annotations

from dataclasses import dataclass, replace

from lakehouse.core.config import Settings
from lakehouse.core.tables import ENRICH, REPLAY, Table, table

QUERY_NAME = "enrichment"


@dataclass(frozen=True)
class EnrichmentOutputs:
    name: str  # "live" or replay_<version>
    events: Table  # the accepted events it enriches (a Delta stream of appends)
    enriched: Table
    revenue: Table
    pins: Table
    progress: Table
    checks: Table  # the judge's passed and failed runs (a replay version's: jobs.enrich_replay)

    @property
    def writer(self) -> str:
        """The one application that writes the outputs (lakehouse.core.locks)."""
        return self.enriched.writer

    @classmethod
    def live(cls) -> EnrichmentOutputs:
        return cls(
            name="live",
            events=table("silver.events"),
            enriched=table("silver.events_enriched"),
            revenue=table("speed.revenue_by_segment"),
            pins=table("ops.enrichment_pins"),
            progress=table("ops.enrichment_progress"),
            checks=table("ops.enrichment_checks"),
        )

    @classmethod
    def replay(cls, version: str) -> EnrichmentOutputs:
        """A replay version's enrichment, beside its views: `replay_<version>.*`, written by
        the replay writer, from the version's own silver events."""
        stage = f"replay_{version}"

        def own(name: str, like: str) -> Table:
            return replace(table(like), name=f"{stage}.{name}", writer=REPLAY)

        return cls(
            name=stage,
            events=own("events", "silver.events"),
            enriched=own("events_enriched", "silver.events_enriched"),
            revenue=own("revenue_by_segment", "speed.revenue_by_segment"),
            pins=own("enrichment_pins", "ops.enrichment_pins"),
            progress=own("enrichment_progress", "ops.enrichment_progress"),
            checks=own("enrichment_checks", "ops.enrichment_checks"),
        )

    def checkpoint(self, settings: Settings) -> str:
        """The query's checkpoint: the live stream's under the enrich writer, a replay's
        beside the version's speed checkpoint (replay_<version>_enrichment)."""
        if self.name == "live":
            return f"{settings.storage.checkpoints}/{ENRICH}/{QUERY_NAME}"
        return self.progress.checkpoint(f"{self.name}_{QUERY_NAME}", settings)
