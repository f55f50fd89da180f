"""The batch layer: recompute every view, complete, for one closed interval, from bronze.

    python -m jobs.batch_layer --start 2026-11-25T10:00Z --end 2026-11-25T11:00Z

Overwrites exactly the interval's rows of batch.event_counts_1m, batch.active_users_10m and
batch.user_sessions, then records the run in ops.batch_runs. Rerunning an interval changes
nothing; intervals never touch each other's rows. An interval whose last run still stands
(no event within its reach appended to bronze since, every view final) is not recomputed
again, and the job says so; --force recomputes it anyway (after changing the views' code or
the lateness settings). Times are UTC (a time without a zone is taken as UTC) and must be
whole minutes.

Exit status (jobs.contract): 0 done, 1 cannot run (config, storage, another batch writer),
2 bad interval, 3 nothing to recompute (no events in the interval, or its last run stands: a
result line names that run; nothing written), 5 failed midway because object storage stopped
answering for longer than its client retries (each table at its last committed version; run
it again).
"""

from __future__ import annotations

import sys

from jobs.batch_interval import LOCK_WAIT_SECONDS, checked_request, interval_parser
from jobs.contract import Exit, exit_with, result_line
from lakehouse.batch.recompute import (
    IntervalUnchanged,
    NoDataError,
    recompute_interval,
    refuse_unchanged,
)
from lakehouse.core.config import ConfigError, get_settings
from lakehouse.core.locks import WriterBusyError, exclusive_writer
from lakehouse.core.spark import SparkSetupError, get_spark
from lakehouse.core.storage import StorageError, ensure_bucket
from lakehouse.core.storage_outage import lost_storage, storage_watched
from lakehouse.core.tables import BATCH

JOB = "batch"


def main(argv: list[str]) -> Exit:
    parser = interval_parser("python -m jobs.batch_layer", __doc__)
    parser.add_argument(
        "--force",
        action="store_true",
        help="recompute even if the interval's last run still stands",
    )
    args = parser.parse_args(argv)
    request = checked_request(args, "batch layer")
    if request is None:
        return Exit.BAD_REQUEST
    interval, run_id = request.interval, request.run_id
    try:
        settings = get_settings()
        if settings.storage.on_s3:
            ensure_bucket(settings)
        print(f"==> batch layer: recomputing {interval} (run {run_id})", flush=True)
        with exclusive_writer(settings, BATCH, wait_seconds=LOCK_WAIT_SECONDS):
            if not args.force:
                refuse_unchanged(settings, interval)
            with storage_watched(settings, "batch layer"):
                spark = get_spark(BATCH, settings)
                run = recompute_interval(spark, settings, interval, run_id, args.force)
    except NoDataError as err:
        if isinstance(err, IntervalUnchanged):  # which run stands, for whoever runs the job
            standing = {"interval": str(interval), "standing_run": err.standing_run}
            print(result_line(JOB, standing), flush=True)
        print(f"batch layer: {err}", file=sys.stderr)
        return Exit.NOTHING_TO_DO
    except (ConfigError, SparkSetupError, StorageError, WriterBusyError) as err:
        print(f"batch layer: {err}", file=sys.stderr)
        return Exit.CANNOT_RUN
    except Exception as err:
        if (lost := lost_storage(err, get_settings())) is None:
            raise
        print(f"batch layer: {lost}", file=sys.stderr)
        return Exit.FAILED
    for v in run.views:
        print(
            f"    {v.view}: {v.rows} rows (version {v.table_version}), "
            f"final until {v.final_until:%Y-%m-%dT%H:%M:%SZ}",
            flush=True,
        )
    if run.vacuumed:
        print(f"    vacuumed (files replaced by earlier runs): {', '.join(run.vacuumed)}")
    print(
        f"==> done in {run.seconds:.1f} s: {run.events} events from bronze version "
        f"{run.bronze_version}",
        flush=True,
    )
    print(result_line(JOB, run.summary()), flush=True)
    return Exit.OK


if __name__ == "__main__":
    exit_with(main(sys.argv[1:]))
