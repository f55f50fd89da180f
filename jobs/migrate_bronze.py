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
storage, a writer still running), 2 refused, nothing changed: a table named that is not a
bronze table, or bronze.events_raw (or a table named) does not exist; 4 a rewrite failed its
check (the version read restored).
"""

from __future__ import annotations

import argparse
import sys

from jobs.arguments import add_migration_arguments
from jobs.contract import Exit, exit_with, result_line
from jobs.parser import OneLineParser
from lakehouse.core.config import ConfigError, get_settings
from lakehouse.core.locks import WriterBusyError
from lakehouse.core.spark import SparkSetupError, get_spark_checked
from lakehouse.core.storage import StorageError
from lakehouse.ops.migrate import (
    MIGRATED,
    MigrationError,
    MigrationRefused,
    migrate_bronze,
    tables_named,
)

JOB = "migrate_bronze"


def main(argv: list[str]) -> Exit:
    parser = OneLineParser(
        prog="python -m jobs.migrate_bronze",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_migration_arguments(parser)
    args = parser.parse_args(argv)
    try:
        tables_named(args.tables)  # before Spark starts
        settings = get_settings()
        done = migrate_bronze(get_spark_checked(JOB, settings), settings, args.tables)
    except MigrationRefused as err:
        print(f"{JOB}: {err}", file=sys.stderr)
        return Exit.BAD_REQUEST
    except MigrationError as err:
        print(f"{JOB}: {err}", file=sys.stderr)
        return Exit.CHECKS_FAILED
    except (ConfigError, SparkSetupError, StorageError, WriterBusyError) as err:
        print(f"{JOB}: {err}", file=sys.stderr)
        return Exit.CANNOT_RUN
    migrated = sum(o.status == MIGRATED for o in done)
    print(f"==> {migrated} of {len(done)} tables rewritten with key and value as bytes")
    result = {
        o.table: {"status": o.status, "rows": o.rows, "version": o.version, "digest": o.digest}
        for o in done
    }
    print(result_line(JOB, result), flush=True)
    return Exit.OK


if __name__ == "__main__":
    exit_with(main(sys.argv[1:]))
