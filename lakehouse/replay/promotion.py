"""Promotion of replay versions: which one serving reads, and the gate a version passes first.

Promotion switches ops.serving_pointer in one Delta commit: readers of the serving layer see
the old or the new version, never a mix. It is refused unless the replay has caught up and its
reconciliation gate passed (replay vs live, and in lambda mode replay vs batch); forced, the
pointer records that and what the gate said. Serving reads a version as its gate saw it (its
tables pinned at the versions checked): what a later extension adds is served once that
extension's gate passed (`advance`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from lakehouse.core.config import Settings
from lakehouse.core.delta_io import delete_folder
from lakehouse.core.locks import exclusive_writer
from lakehouse.core.storage import stored_bytes
from lakehouse.core.tables import VERSIONS
from lakehouse.joins.outputs import EnrichmentOutputs
from lakehouse.replay.plan import check_version_name
from lakehouse.replay.versions import (
    LIVE,
    VersionError,
    VersionInfo,
    active_version,
    list_versions,
    outputs_of,
    pinned_since,
    pins_of,
    pointer_history,
    switch_pointer,
    table_versions,
    unserved_note,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from lakehouse.reconcile.gate import GateVerdict

Say = Callable[[str], None]


class GateFailedError(VersionError):
    """The version's reconciliation gate failed: it was not promoted (nothing changed)."""


@dataclass(frozen=True)
class Listing:
    """Every version, its size on storage, the active one and whether serving reads all of it."""

    versions: list[VersionInfo]
    sizes_mb: dict[str, float | None]
    active: str
    unserved: str | None  # why serving reads less of the active version than it holds


def list_all(settings: Settings) -> Listing:
    """Read with delta-rs: no Spark, an answer in about a second."""
    versions = list_versions(settings)
    sizes = {v.version: size_mb(settings, v.version) for v in versions}
    active = active_version(settings)
    unserved = None
    if not serves_all_of(settings, active):
        since = pinned_since(pointer_history(settings), active)
        unserved = unserved_note(active, since, datetime.now(UTC))
    return Listing(versions, sizes, active, unserved)


def promotion_gate(
    spark: SparkSession, settings: Settings, version: str, say: Say = print
) -> GateVerdict:
    """Replay vs live (the replay = live + the late events live set aside) and, in lambda
    mode, batch vs replay; every comparison must pass and compare something."""
    from lakehouse.reconcile.gate import GateVerdict, gate
    from lakehouse.reconcile.run import reconcile
    from lakehouse.reconcile.sources import batch_source, speed_source, stream_source
    from lakehouse.transforms.views import VIEWS

    replay = stream_source(outputs_of(version), f"replay_{version}")
    pairs = [(replay, speed_source())]
    if settings.mode == "lambda":
        pairs.append((batch_source(), replay))
    reasons, first, beyond = [], [], 0
    for left, right in pairs:
        run = reconcile(
            spark,
            settings,
            left,
            right,
            list(VIEWS),
            f"promote-{version}-{left.name}-vs-{right.name}",
            datetime.now(UTC),
        )
        try:
            verdict = gate(run, require_compared=True)
        finally:
            run.release()
        say(f"    {left.name} vs {right.name}: {verdict.message()}")
        beyond += verdict.beyond_threshold
        reasons += [f"{left.name} vs {right.name}: {r}" for r in verdict.reasons]
        first += verdict.first_windows
    return GateVerdict(not reasons, beyond, reasons, first)


def promote(
    spark: SparkSession, settings: Settings, version: str, force: bool, say: Say = print
) -> str:
    """Make `version` the one serving reads, or, when it already is, let serving read what
    its extensions added since its gate last passed (an "advance")."""
    action = promotion_action(settings, version)
    verdict = gated_switch(spark, settings, version, action, force, say)
    if not verdict.passed and not force:
        raise GateFailedError(
            f"promotion of {version} refused: {verdict.message()}\n"
            "(fix the cause and replay again, or promote with --force: it is recorded)"
        )
    done = (
        f"advanced {version} to what its extensions added"
        if action == "advance"
        else f"promoted {version}"
    )
    return done + (" (forced past a failed gate)" if not verdict.passed else "")


def promotion_action(settings: Settings, version: str) -> str:
    """ "promote", or "advance" for the active version; VersionError when neither can be done
    (checked without Spark, before the gate starts it)."""
    info = _existing(settings, version)
    if info.status != "caught_up":
        raise VersionError(f"{version} has not caught up (status {info.status}): let it finish")
    if info.active and serves_all_of(settings, version):
        raise VersionError(f"{version} is already the active version; serving reads all of it")
    return "advance" if info.active else "promote"


def serves_all_of(settings: Settings, version: str) -> bool:
    """Whether serving reads everything `version` holds (no unchecked writes beyond its pins)."""
    if version == LIVE:
        return True
    checked = pins_of(pointer_history(settings), version)
    return checked is None or checked == table_versions(settings, version)


def advance_extension(
    spark: SparkSession, settings: Settings, version: str, say: Say = print
) -> GateVerdict | None:
    """After an extension of `version`: if it is (still) the active version, let serving read
    what it added when the gate passes. None: it is not active, nothing to check."""
    with exclusive_writer(settings, VERSIONS, wait_seconds=600):
        if version != active_version(settings):
            return None
        return gated_switch(spark, settings, version, "advance", say=say)


def gated_switch(
    spark: SparkSession,
    settings: Settings,
    version: str,
    action: str,
    force: bool = False,
    say: Say = print,
) -> GateVerdict:
    """Run `version`'s gate; if it passes (or `force`), switch serving to the version as it
    is now, pinned: what it writes later is served only after its own gate."""
    # Pinned before the gate, so serving never reads beyond what the gate saw.
    pins = table_versions(settings, version)
    say(f"==> reconciliation gate for {version}")
    verdict = promotion_gate(spark, settings, version, say)
    if verdict.passed or force:
        switch_pointer(
            spark, settings, action, version, version, force, verdict.message(), pins=pins
        )
    return verdict


def rollback(spark: SparkSession, settings: Settings) -> str:
    current, before = rollback_target(settings)
    switch_pointer(spark, settings, "rollback", current, before)
    return f"rolled back from {current} to {before}"


def rollback_target(settings: Settings) -> tuple[str, str]:
    """(the active version, the one a rollback returns to); VersionError when there is none."""
    # The actives form a stack: a promotion pushes, a rollback pops back to what was before.
    stack = [LIVE]
    for row in pointer_history(settings):
        if row["action"] == "promote":
            stack.append(row["version"])
        elif row["action"] == "rollback" and len(stack) > 1:
            stack.pop()
    if len(stack) == 1:
        raise VersionError("nothing to roll back: the live tables are what serving reads")
    current, before = stack[-1], stack[-2]
    if before != LIVE and _existing(settings, before).status == "removed":
        raise VersionError(f"cannot roll back to {before}: it was removed")
    return current, before


def remove(spark: SparkSession, settings: Settings, version: str) -> str:
    check_removable(settings, version)
    outputs = outputs_of(version)
    delete_folder(spark, outputs.progress.path(settings).rsplit("/", 1)[0])
    for checkpoint in checkpoints_of(settings, version):
        delete_folder(spark, checkpoint)
    switch_pointer(spark, settings, "remove", version, active_version(settings))
    return f"removed {version} (tables and checkpoint)"


def checkpoints_of(settings: Settings, version: str) -> list[str]:
    """Every checkpoint of the version's queries: a version made again under the same name
    must start from nothing. The speed layer's replay, its enrichment, its commerce stream
    and its windowed joins."""
    from lakehouse.commerce.outputs import CommerceOutputs
    from lakehouse.joins.windowed import queries_of

    return [
        outputs_of(version).checkpoint(settings),
        EnrichmentOutputs.replay(version).checkpoint(settings),
        CommerceOutputs.replay(version).checkpoint(settings),
        *(query.checkpoint(settings) for query in queries_of(version)),
    ]


def check_removable(settings: Settings, version: str) -> None:
    """VersionError unless `version` can be removed (checked without Spark)."""
    info = _existing(settings, version)
    if info.active or version == active_version(settings):
        raise VersionError(f"{version} is the active version: promote or roll back first")
    if info.status == "removed":
        raise VersionError(f"{version} is already removed")
    if info.status == "running":
        raise VersionError(f"{version} is still running: stop it first")
    if info.status == "extending":
        raise VersionError(
            f"{version} is being extended, or its extension was interrupted: let it finish "
            f"(`python -m jobs.replay --extend {version}` resumes it)"
        )


def _existing(settings: Settings, version: str) -> VersionInfo:
    check_version_name(version)
    found = {v.version: v for v in list_versions(settings)}
    if version not in found:
        known = ", ".join(found) or "none yet"
        raise VersionError(f"no version {version!r}; versions: {known}")
    return found[version]


def size_mb(settings: Settings, version: str) -> float | None:
    """What `version`'s tables take on storage, every file counted (old ones too)."""
    found = stored_bytes(settings, outputs_of(version).progress.path(settings).rsplit("/", 1)[0])
    return None if found is None else found / 1e6
