"""Replay versions: list them, promote one to serving, roll back, remove old ones.

    python -m jobs.versions list
    python -m jobs.versions promote v3 [--force]   # after its reconciliation gate passes
    python -m jobs.versions rollback               # back to the version active before
    python -m jobs.versions remove v2              # its tables and checkpoint; not the active one

Promotion switches ops.serving_pointer in one Delta commit: readers of the serving layer see
the old or the new version, never a mix. Serving reads the active version in kappa mode; in
lambda mode (the default) it reads batch + speed, and the active version waits for kappa.
Promotion is refused unless the replay has caught up and its reconciliation gate passed
(replay vs live, and in lambda mode replay vs batch: every window equal or its difference
explained by a recorded late event). --force promotes anyway and the pointer records that it
was forced and what the gate said.

Serving reads a version as its gate saw it: what a later extension of the active version
adds (`python -m jobs.replay --extend`) is served once that extension's gate passed. If it
failed, promoting the active version again runs the gate again (--force: serve it anyway).

Exit status: 0 done, 1 cannot run, 2 refused (bad request or failed gate; nothing changed).
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from jobs.arguments import OneLineParser
from lakehouse.core.config import ConfigError, Settings, get_settings
from lakehouse.core.locks import WriterBusyError, exclusive_writer
from lakehouse.core.spark import SparkSetupError, get_spark
from lakehouse.core.storage import StorageError, ensure_bucket
from lakehouse.core.tables import VERSIONS
from lakehouse.replay.plan import ReplayRequestError, check_version_name
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

EXIT_CANNOT_RUN, EXIT_REFUSED = 1, 2
RESULT_PREFIX = "versions result: "


def promotion_gate(spark: SparkSession, settings: Settings, version: str) -> GateVerdict:
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
        print(f"    {left.name} vs {right.name}: {verdict.message()}", flush=True)
        beyond += verdict.beyond_threshold
        reasons += [f"{left.name} vs {right.name}: {r}" for r in verdict.reasons]
        first += verdict.first_windows
    return GateVerdict(not reasons, beyond, reasons, first)


def promote(spark: SparkSession, settings: Settings, version: str, force: bool) -> str:
    """Make `version` the one serving reads, or, when it already is, let serving read what
    its extensions added since its gate last passed (an "advance")."""
    info = _existing(spark, settings, version)
    if info.status != "caught_up":
        raise VersionError(f"{version} has not caught up (status {info.status}): let it finish")
    if info.active and serves_all_of(spark, settings, version):
        raise VersionError(f"{version} is already the active version; serving reads all of it")
    verdict = gated_switch(spark, settings, version, "advance" if info.active else "promote", force)
    if not verdict.passed and not force:
        raise VersionError(
            f"promotion of {version} refused: {verdict.message()}\n"
            "(fix the cause and replay again, or promote with --force: it is recorded)"
        )
    done = (
        f"advanced {version} to what its extensions added" if info.active else f"promoted {version}"
    )
    return done + (" (forced past a failed gate)" if not verdict.passed else "")


def serves_all_of(spark: SparkSession, settings: Settings, version: str) -> bool:
    """Whether serving reads everything `version` holds (no unchecked writes beyond its pins)."""
    if version == LIVE:
        return True
    checked = pins_of(pointer_history(spark, settings), version)
    return checked is None or checked == table_versions(spark, settings, version)


def advance_extension(spark: SparkSession, settings: Settings, version: str) -> GateVerdict | None:
    """After an extension of `version`: if it is (still) the active version, let serving read
    what it added when the gate passes. None: it is not active, nothing to check."""
    with exclusive_writer(settings, VERSIONS, wait_seconds=600):
        if version != active_version(spark, settings):
            return None
        return gated_switch(spark, settings, version, "advance")


def gated_switch(
    spark: SparkSession, settings: Settings, version: str, action: str, force: bool = False
) -> GateVerdict:
    """Run `version`'s gate; if it passes (or `force`), switch serving to the version as it
    is now, pinned: what it writes later is served only after its own gate."""
    # Pinned before the gate, so serving never reads beyond what the gate saw.
    pins = table_versions(spark, settings, version)
    print(f"==> reconciliation gate for {version}", flush=True)
    verdict = promotion_gate(spark, settings, version)
    if verdict.passed or force:
        switch_pointer(
            spark, settings, action, version, version, force, verdict.message(), pins=pins
        )
    return verdict


def rollback(spark: SparkSession, settings: Settings) -> str:
    # The actives form a stack: a promotion pushes, a rollback pops back to what was before.
    stack = [LIVE]
    for row in pointer_history(spark, settings):
        if row["action"] == "promote":
            stack.append(row["version"])
        elif row["action"] == "rollback" and len(stack) > 1:
            stack.pop()
    if len(stack) == 1:
        raise VersionError("nothing to roll back: the live tables are what serving reads")
    current, before = stack[-1], stack[-2]
    if before != LIVE and _existing(spark, settings, before).status == "removed":
        raise VersionError(f"cannot roll back to {before}: it was removed")
    switch_pointer(spark, settings, "rollback", current, before)
    return f"rolled back from {current} to {before}"


def remove(spark: SparkSession, settings: Settings, version: str) -> str:
    info = _existing(spark, settings, version)
    if info.active or version == active_version(spark, settings):
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
    outputs = outputs_of(version)
    _delete(spark, outputs.progress.path(settings).rsplit("/", 1)[0])
    _delete(spark, outputs.checkpoint(settings))
    switch_pointer(spark, settings, "remove", version, active_version(spark, settings))
    return f"removed {version} (tables and checkpoint)"


def _existing(spark: SparkSession, settings: Settings, version: str) -> VersionInfo:
    check_version_name(version)
    found = {v.version: v for v in list_versions(spark, settings)}
    if version not in found:
        known = ", ".join(found) or "none yet"
        raise VersionError(f"no version {version!r}; versions: {known}")
    return found[version]


def _delete(spark: SparkSession, path: str) -> None:
    """Delete a folder on local disk or S3 alike, through Hadoop's file system."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    hadoop_path = jvm.org.apache.hadoop.fs.Path(path)
    fs = hadoop_path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    fs.delete(hadoop_path, True)


def size_mb(spark: SparkSession, settings: Settings, version: str) -> float | None:
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    path = jvm.org.apache.hadoop.fs.Path(
        outputs_of(version).progress.path(settings).rsplit("/", 1)[0]
    )
    fs = path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    if not fs.exists(path):
        return None
    return float(fs.getContentSummary(path).getLength()) / 1e6


def show(versions: list[VersionInfo], sizes: dict[str, float | None]) -> str:
    if not versions:
        return "no replay versions yet (python -m jobs.replay)"
    lines = [
        f"{'':2}{'version':<10}{'status':<11}{'created (UTC)':<18}{'records':>10}{'MB':>9}"
        "  start / by"
    ]
    for v in versions:
        gaps = f", gap {sum(v.gaps.values())} records" if v.gaps else ""
        gaps += f", extended {v.extensions}x" if v.extensions else ""
        size = sizes.get(v.version)
        lines.append(
            f"{'*' if v.active else '':2}{v.version:<10}{v.status:<11}"
            f"{v.created_at:%Y-%m-%d %H:%M}  {v.records if v.records is not None else '-':>10}"
            f"{f'{size:.1f}' if size is not None else '-':>9}  {v.start}{gaps} / {v.by}"
        )
    return "\n".join(lines)


def outcome_line(done: str, active: str, mode: str) -> str:
    """What a promote, rollback or remove did, and what serving reads after it. Serving reads
    the active version only in kappa mode; in lambda mode it reads batch + speed, and a
    promotion there prepares the switch to kappa."""
    if mode == "kappa":
        return f"==> {done}; serving now reads {active}"
    return (
        f"==> {done}; the active version is now {active}, which serving reads once the mode is "
        "kappa (TRIBUTARY__MODE=kappa); in lambda mode, as now, serving reads batch + speed"
    )


def main(argv: list[str]) -> int:
    parser = OneLineParser(
        prog="python -m jobs.versions",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("list", help="every version: status, size, where from, by whom")
    p = commands.add_parser("promote", help="make a caught-up version the active one")
    p.add_argument("version")
    p.add_argument("--force", action="store_true", help="promote past a failed gate (recorded)")
    commands.add_parser("rollback", help="switch back to the version active before")
    r = commands.add_parser("remove", help="delete a version's tables and checkpoint")
    r.add_argument("version")
    args = parser.parse_args(argv)
    try:
        if getattr(args, "version", None):
            check_version_name(args.version)
        settings = get_settings()
        if settings.storage.on_s3:
            ensure_bucket(settings)
        spark = get_spark(VERSIONS, settings)
        if args.command == "list":
            versions = list_versions(spark, settings)
            sizes = {v.version: size_mb(spark, settings, v.version) for v in versions}
            print(show(versions, sizes))
            active = active_version(spark, settings)
            print(f"active: {active} (* above)")
            if not serves_all_of(spark, settings, active):
                since = pinned_since(pointer_history(spark, settings), active)
                print(unserved_note(active, since, datetime.now(UTC)))
            return 0
        with exclusive_writer(settings, VERSIONS, wait_seconds=60):
            if args.command == "promote":
                done = promote(spark, settings, args.version, args.force)
            elif args.command == "rollback":
                done = rollback(spark, settings)
            else:
                done = remove(spark, settings, args.version)
        active = active_version(spark, settings)
        print(outcome_line(done, active, settings.mode), flush=True)
        print(RESULT_PREFIX + json.dumps({"outcome": done, "active": active}), flush=True)
        return 0
    except (VersionError, ReplayRequestError) as err:
        print(f"versions: {err}; nothing changed", file=sys.stderr)
        return EXIT_REFUSED
    except (ConfigError, SparkSetupError, StorageError, WriterBusyError) as err:
        print(f"versions: {err}", file=sys.stderr)
        return EXIT_CANNOT_RUN


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
