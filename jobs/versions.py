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

Exit status (jobs.contract): 0 done, 1 cannot run, 2 refused (a bad request; nothing changed),
4 promotion refused by a failed gate (nothing changed).
"""

from __future__ import annotations

import argparse
import sys

from jobs.arguments import say
from jobs.contract import Exit, exit_with, result_line
from jobs.parser import OneLineParser
from lakehouse.core.config import ConfigError, get_settings
from lakehouse.core.locks import WriterBusyError, exclusive_writer
from lakehouse.core.spark import SparkSetupError, get_spark
from lakehouse.core.storage import StorageError, ensure_bucket
from lakehouse.core.tables import VERSIONS
from lakehouse.replay.plan import ReplayRequestError, check_version_name
from lakehouse.replay.promotion import (
    GateFailedError,
    check_removable,
    list_all,
    promote,
    promotion_action,
    remove,
    rollback,
    rollback_target,
)
from lakehouse.replay.versions import LIVE, VersionError, VersionInfo, active_version

JOB = "versions"


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


def main(argv: list[str]) -> Exit:
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
        if args.command == "list":
            listing = list_all(settings)
            say(show(listing.versions, listing.sizes_mb))
            say(
                f"active: {listing.active} (* above)"
                if listing.active != LIVE
                else "active: live (the speed layer's own tables: no replay version promoted)"
            )
            if listing.unserved:
                say(listing.unserved)
            return Exit.OK
        with exclusive_writer(settings, VERSIONS, wait_seconds=60):
            # Refused before Spark starts: a refusal answers in about a second.
            if args.command == "promote":
                promotion_action(settings, args.version)
            elif args.command == "rollback":
                rollback_target(settings)
            else:
                check_removable(settings, args.version)
            spark = get_spark(VERSIONS, settings)
            if args.command == "promote":
                done = promote(spark, settings, args.version, args.force, say)
            elif args.command == "rollback":
                done = rollback(spark, settings)
            else:
                done = remove(spark, settings, args.version)
        active = active_version(settings)
        say(outcome_line(done, active, settings.mode))
        say(result_line(JOB, {"outcome": done, "active": active}))
        return Exit.OK
    except GateFailedError as err:
        print(f"versions: {err}; nothing changed", file=sys.stderr)
        return Exit.CHECKS_FAILED
    except (VersionError, ReplayRequestError) as err:
        print(f"versions: {err}; nothing changed", file=sys.stderr)
        return Exit.BAD_REQUEST
    except (ConfigError, SparkSetupError, StorageError, WriterBusyError) as err:
        print(f"versions: {err}", file=sys.stderr)
        return Exit.CANNOT_RUN


if __name__ == "__main__":
    exit_with(main(sys.argv[1:]))
