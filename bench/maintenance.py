"""What the maintenance job saves: the serving layer's read of ops.batch_runs, before and after.

    .venv/bin/python -m bench.maintenance [--runs 720]

Serving reads ops.batch_runs (which intervals the batch made final) on every query, for every
view. Each batch run appends to it: --runs commits of three rows (one per view; 720 is a
month of hourly runs). Steps, in one process and one SparkSession:
1. baseline: the serving layer's coverage read for one view, timed --repeat times;
2. the maintenance job's compaction and vacuum of the table (lakehouse.ops.maintenance);
3. the same read again. Printed, and written to bench/results/maintenance-<timestamp>.json.
"""

from __future__ import annotations

import argparse
import statistics
import time
from datetime import UTC, datetime, timedelta

from bench.batch_layer import bench_settings
from bench.report import save_results
from lakehouse.core.spark import get_spark
from lakehouse.core.tables import table
from lakehouse.ops.maintenance import look_after
from lakehouse.serving.serve import batch_coverage
from lakehouse.transforms.views import VIEWS, view


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__)
    parser.add_argument("--runs", type=int, default=720, help="batch runs (commits) recorded")
    parser.add_argument("--repeat", type=int, default=7, help="timed reads before and after")
    args = parser.parse_args()
    run = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    settings = bench_settings("local", run)
    spark = get_spark("bench-maintenance", settings)
    runs = table("ops.batch_runs")
    first = datetime(2026, 1, 1, tzinfo=UTC)
    print(f"==> recording {args.runs} batch runs, one commit each", flush=True)
    for i in range(args.runs):
        start = first + timedelta(hours=i)
        rows = [
            {
                "run_id": f"run-{i}",
                "view": name,
                "interval_start": start,
                "interval_end": start + timedelta(hours=1),
                "final_until": start + timedelta(hours=1),
                "rows": 100,
                "table_version": i,
                "bronze_version": i,
                "ingest_high_water": start + timedelta(hours=1, minutes=5),
                "watermark": start + timedelta(hours=1),
                "events": 1000,
                "started_at": start + timedelta(hours=1, minutes=5),
                "finished_at": start + timedelta(hours=1, minutes=6),
                "duration_seconds": 60.0,
            }
            for name in VIEWS
        ]
        spark.createDataFrame(rows, table("ops.batch_runs").spark_schema()).coalesce(
            1
        ).write.format("delta").mode("append").save(runs.path(settings))
        if (i + 1) % 100 == 0:
            print(f"    {i + 1}/{args.runs} runs recorded", flush=True)

    counts = view("event_counts_1m")

    def read_seconds() -> list[float]:
        times = []
        for _ in range(args.repeat):
            began = time.monotonic()
            coverage = batch_coverage(spark, settings, counts.name)
            times.append(time.monotonic() - began)
            assert len(coverage.ranges) == 1 and coverage.table_version == args.runs - 1
        return times

    read_seconds()  # the first read of a session plans and compiles; not timed
    before = read_seconds()
    cared = look_after(spark, settings, runs)
    print(f"    {cared.describe()}", flush=True)
    after = read_seconds()
    result = {
        "run": run,
        "batch_runs_recorded": args.runs,
        "files_before": cared.files_before,
        "files_after": cared.files_after,
        "maintenance_seconds": round(cared.seconds, 2),
        "coverage_read_seconds_before": round(statistics.median(before), 3),
        "coverage_read_seconds_after": round(statistics.median(after), 3),
        "after_to_before": round(statistics.median(after) / statistics.median(before), 3),
    }
    save_results("maintenance", run, result)


if __name__ == "__main__":
    main()
