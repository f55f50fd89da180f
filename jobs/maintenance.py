"""Compact and vacuum the tables no stream looks after (lakehouse/ops/maintenance.py).

    python -m jobs.maintenance             # every bookkeeping table and replay version
    python -m jobs.maintenance --list      # which tables, by writer; change nothing

ops.batch_runs, ops.replay_versions, ops.serving_pointer, dq.* and the replay versions'
tables: each is compacted once it has `maintenance.compact_at_files` files, and the files no
version newer than `maintenance.vacuum_after_hours` ago reads are deleted, while the lock of
the job that writes it is held. A writer busy for longer than `maintenance.lock_wait_seconds`
keeps its tables as they are until the next run (said in the output, not an error).

Exit status (jobs.contract): 0 done, 1 cannot run (config, Spark, storage).
"""

from __future__ import annotations

import argparse
import sys
import time

from jobs.contract import Exit, exit_with, result_line
from jobs.parser import OneLineParser
from lakehouse.core.config import ConfigError, get_settings
from lakehouse.core.spark import SparkSetupError, get_spark
from lakehouse.core.storage import StorageError, ensure_bucket
from lakehouse.ops.maintenance import maintain, tables_to_maintain

JOB = "maintenance"


def main(argv: list[str]) -> Exit:
    parser = OneLineParser(
        prog="python -m jobs.maintenance",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--list", action="store_true", help="list the tables; change nothing")
    args = parser.parse_args(argv)
    began = time.monotonic()
    try:
        settings = get_settings()
        if settings.storage.on_s3:
            ensure_bucket(settings)
        spark = get_spark("maintenance", settings)
        by_writer, pinned = tables_to_maintain(spark, settings)
        print("==> maintenance: tables by the writer whose lock guards them", flush=True)
        for writer, tables in by_writer.items():
            print(f"    {writer}: {', '.join(t.name for t in tables)}", flush=True)
        if pinned is not None:
            print(f"    {pinned.describe()}", flush=True)
        if args.list:
            return Exit.OK
        print("==> compacting and vacuuming", flush=True)
        cared, busy = maintain(spark, settings, by_writer)
    except (ConfigError, SparkSetupError, StorageError) as err:
        print(f"maintenance: {err}", file=sys.stderr)
        return Exit.CANNOT_RUN
    seconds = time.monotonic() - began
    print(
        f"==> done in {seconds:.1f} s: {len(cared)} tables looked after"
        + (f", {sum(len(b.tables) for b in busy)} left for the next run" if busy else ""),
        flush=True,
    )
    result = {
        "tables": len(cared),
        "files_before": sum(c.files_before for c in cared),
        "files_after": sum(c.files_after for c in cared),
        "deleted_files": sum(c.deleted_files for c in cared),
        "busy": [t for b in busy for t in b.tables],
        "seconds": round(seconds, 1),
    }
    print(result_line(JOB, result), flush=True)
    return Exit.OK


if __name__ == "__main__":
    exit_with(main(sys.argv[1:]))
