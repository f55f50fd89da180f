"""Rewrite bronze tables written with key and value as strings so they hold bytes, as received.

    python -m jobs.migrate_bronze                       # bronze.* and every replay_<v>.quarantine
    python -m jobs.migrate_bronze --table bronze.quarantine
    tributary migrate-bronze ...   make migrate-bronze ARGS="..."   (the same)

Each table is rewritten in one Delta commit, trusted only once it holds the same rows and the
same bytes as the version it was read from (count and digest, printed); otherwise that version
is restored (lakehouse/ops/migrate.py). A table already holding bytes is left unchanged, so
running it again changes nothing. Stop the speed layer (and any replay) first: the migration
holds their writer locks.

Exit status (jobs.contract): 0 done (or nothing left to migrate), 1 cannot run (config, Spark,
storage, a writer still running), 2 refused: a table named that is not a bronze table of the
registry, or bronze.events_raw (or a table named) does not exist; 4 a rewrite failed its check
(restored).
"""

from __future__ import annotations

import argparse
import sys

from jobs.arguments import OneLineParser
from jobs.contract import Exit, result_line
from lakehouse.core.config import ConfigError, get_settings
from lakehouse.core.locks import WriterBusyError
from lakehouse.core.spark import SparkSetupError, get_spark
from lakehouse.core.storage import StorageError, check_bucket

JOB = "migrate_bronze"
MASTER = "bronze.events_raw"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--table",
        dest="tables",
        nargs="+",
        metavar="NAME",
        help="only these tables: bronze.events_raw, bronze.quarantine, replay_<v>.quarantine",
    )


def run(args: argparse.Namespace, prog: str = JOB) -> Exit:
    from lakehouse.core.delta_io import table_exists
    from lakehouse.core.tables import Table, table
    from lakehouse.ops.migrate import (
        BRONZE,
        MIGRATED,
        MigrationError,
        migrate_to_bytes,
        tables_to_migrate,
    )
    from lakehouse.speed.micro_batch import SpeedOutputs

    named: list[Table] = []
    for name in args.tables or []:
        stage, _, rest = name.partition(".")
        if name in BRONZE:
            named.append(table(name))
        elif stage.startswith("replay_") and rest == "quarantine":
            named.append(SpeedOutputs.replay(stage.removeprefix("replay_")).quarantine)
        else:
            print(
                f"{prog}: {name} is not a table with bytes to migrate ({', '.join(BRONZE)}, "
                "replay_<version>.quarantine); nothing changed",
                file=sys.stderr,
            )
            return Exit.BAD_REQUEST
    settings = get_settings()
    if settings.storage.on_s3:
        check_bucket(settings)
    spark = get_spark(JOB, settings)
    targets = named or tables_to_migrate(spark, settings)
    # Refused before anything changes: a table asked for by name, or the master dataset.
    required = named or [table(MASTER)]
    for target in required:
        if not table_exists(spark, target, settings):
            print(
                f"{prog}: {target.name}: no table at {target.path(settings)} (is this the "
                "profile the lakehouse is on?); nothing changed",
                file=sys.stderr,
            )
            return Exit.BAD_REQUEST
    done = []
    for target in targets:
        try:
            outcome = migrate_to_bytes(spark, settings, target)
        except MigrationError as err:
            print(f"{prog}: {err}", file=sys.stderr)
            return Exit.CHECKS_FAILED
        print(f"    {outcome.describe()}", flush=True)
        done.append(outcome)
    migrated = sum(o.status == MIGRATED for o in done)
    print(f"==> {migrated} of {len(done)} tables rewritten with key and value as bytes")
    result = {
        o.table: {"status": o.status, "rows": o.rows, "version": o.version, "digest": o.digest}
        for o in done
    }
    print(result_line(JOB, result), flush=True)
    return Exit.OK


def main(argv: list[str]) -> Exit:
    parser = OneLineParser(
        prog="python -m jobs.migrate_bronze",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return run(args)
    except (ConfigError, SparkSetupError, StorageError, WriterBusyError) as err:
        print(f"{JOB}: {err}", file=sys.stderr)
        return Exit.CANNOT_RUN


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
