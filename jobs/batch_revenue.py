"""The batch layer's revenue view: recompute it, complete, for one closed interval, from bronze
and the dimensions' history tables.

    python -m jobs.batch_revenue --start 2026-11-25T10:00Z --end 2026-11-25T11:00Z

Overwrites exactly the interval's hour windows of batch.revenue_by_segment (each accepted
event, late ones included, enriched as of its event time with the history tables' latest
versions), then records the run in ops.batch_runs (view revenue_by_segment), where the
serving layer finds what is final. A rerun takes in the dimension changes captured since;
while nothing changed (every window of the last run final, bronze and the history tables as it
read them) it recomputes nothing and names the run that stands (--force recomputes anyway).
Times are UTC (a time without a zone is taken as UTC) and must be whole minutes.

Exit status (jobs.contract): 0 done, 1 cannot run (config, storage, another batch writer),
2 bad interval, 3 nothing to recompute (no events in the interval, or the last run stands;
nothing written), 5 failed midway because object storage stopped answering for longer than its
client retries (run it again).
"""

from __future__ import annotations

import sys

from jobs.batch_interval import LOCK_WAIT_SECONDS, checked_request, interval_parser
from jobs.contract import Exit, exit_with, result_line
from lakehouse.batch.recompute import IntervalUnchanged, NoDataError
from lakehouse.core.config import ConfigError, get_settings
from lakehouse.core.locks import WriterBusyError, exclusive_writer
from lakehouse.core.spark import SparkSetupError, get_spark
from lakehouse.core.storage import StorageError, ensure_bucket
from lakehouse.core.storage_outage import lost_storage, storage_watched
from lakehouse.core.tables import BATCH
from lakehouse.joins.batch import recompute_revenue, revenue_unchanged

JOB = "batch_revenue"


def main(argv: list[str]) -> Exit:
    parser = interval_parser("python -m jobs.batch_revenue", __doc__)
    parser.add_argument(
        "--force", action="store_true", help="recompute even if the interval's last run stands"
    )
    args = parser.parse_args(argv)
    request = checked_request(args, "batch revenue")
    if request is None:
        return Exit.BAD_REQUEST
    interval, run_id = request.interval, request.run_id
    try:
        settings = get_settings()
        if settings.storage.on_s3:
            ensure_bucket(settings)
        print(f"==> batch revenue: recomputing {interval} (run {run_id})", flush=True)
        with exclusive_writer(settings, BATCH, wait_seconds=LOCK_WAIT_SECONDS):
            standing = None if args.force else revenue_unchanged(settings, interval)
            if standing is not None:
                why = "bronze and the history tables as it read them"
                raise IntervalUnchanged(
                    f"{interval} unchanged since run {standing} ({why}): nothing recomputed",
                    standing,
                )
            with storage_watched(settings, "batch revenue"):
                spark = get_spark(BATCH, settings)
                run = recompute_revenue(spark, settings, interval, run_id)
    except NoDataError as err:
        if isinstance(err, IntervalUnchanged):  # which run stands, for whoever runs the job
            standing_line = {"interval": str(interval), "standing_run": err.standing_run}
            print(result_line(JOB, standing_line), flush=True)
        print(f"batch revenue: {err}", file=sys.stderr)
        return Exit.NOTHING_TO_DO
    except (ConfigError, SparkSetupError, StorageError, WriterBusyError) as err:
        print(f"batch revenue: {err}", file=sys.stderr)
        return Exit.CANNOT_RUN
    except Exception as err:
        if (lost := lost_storage(err, get_settings())) is None:
            raise
        print(f"batch revenue: {lost}", file=sys.stderr)
        return Exit.FAILED
    versions = ", ".join(f"{name} {v}" for name, v in run.pins.items())
    print(
        f"    revenue_by_segment: {run.rows} rows (version {run.table_version}), final until "
        f"{run.final_until:%Y-%m-%dT%H:%M:%SZ}; history versions joined: {versions}",
        flush=True,
    )
    print(
        f"==> done in {run.seconds:.1f} s: {run.events} events from bronze version "
        f"{run.bronze_version}",
        flush=True,
    )
    print(result_line(JOB, run.summary()), flush=True)
    return Exit.OK


if __name__ == "__main__":
    exit_with(main(sys.argv[1:]))
