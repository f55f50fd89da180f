"""What one small Delta commit costs, with and without a transaction id.

    .venv/bin/python -m bench.delta_commits [--commits 16] [--rows 30]

Every write of a micro-batch commits to a table that grows by a file or two per batch. Delta's
exactly-once check (the txnAppId/txnVersion write options) asks the table's snapshot for its
transactions, and Delta 4.4 rebuilds the snapshot's state from the log for that, in Spark
jobs of its own. Timed here on local disk, in one process, the variants alternating commit by
commit: an append with a transaction id (lakehouse.core.delta_io.append_once), the same append
without (append_new), and a MERGE that updates and inserts a few rows of a small table, its
source copied first as Delta does by default (merge) or read as it is (merge_source_as_is). The
figures are medians after a warm-up, and each variant's ratio to the plain append. Results go
to bench/results/delta_commits-<timestamp>.json.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.report import save_results

WARM_UP_COMMITS = 4
MATERIALIZE_SOURCE = "spark.databricks.delta.merge.materializeSource"


def variants(spark: Any, folder: Path, rows: int) -> dict[str, Callable[[int], None]]:
    """Each variant's commit number i, on a table of its own."""
    from delta.tables import DeltaTable

    frame = spark.range(rows).selectExpr("id AS k", "CAST(id AS STRING) AS v", "1L AS n")
    frame = frame.coalesce(1).localCheckpoint()
    names = ("append_once", "append_new", "merge", "merge_source_as_is")
    paths = {name: str(folder / name) for name in names}
    for name in ("merge", "merge_source_as_is"):
        frame.write.format("delta").save(paths[name])

    def append(path: str, txn: bool) -> Callable[[int], None]:
        def commit(i: int) -> None:
            writer = frame.write.format("delta").mode("append")
            if txn:
                writer = writer.option("txnAppId", "bench").option("txnVersion", i)
            writer.save(path)

        return commit

    def merge(path: str, materialize: str) -> Callable[[int], None]:
        session = spark.newSession()
        session.conf.set(MATERIALIZE_SOURCE, materialize)

        def commit(i: int) -> None:
            source = frame.selectExpr(f"k + {i} * {rows // 2} AS k", "v", "n")
            (
                DeltaTable.forPath(session, path)
                .alias("t")
                .merge(source.alias("s"), "t.k = s.k")
                .whenMatchedUpdate(set={"n": "t.n + s.n"})
                .whenNotMatchedInsertAll()
                .execute()
            )

        return commit

    return {
        "append_new": append(paths["append_new"], txn=False),
        "append_once": append(paths["append_once"], txn=True),
        # Delta's default (auto) copies a source that is not a Delta scan before it merges.
        "merge": merge(paths["merge"], "auto"),
        "merge_source_as_is": merge(paths["merge_source_as_is"], "none"),
    }


def run(commits: int, rows: int) -> dict[str, Any]:
    from bench.speed_layer import bench_settings
    from lakehouse.core.spark import get_spark

    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    spark = get_spark("bench-delta-commits", bench_settings("local", "bench-delta", stamp))
    with tempfile.TemporaryDirectory(prefix="tributary-bench-delta-") as folder:
        commit = variants(spark, Path(folder), rows)
        seconds: dict[str, list[float]] = {name: [] for name in commit}
        for i in range(commits):
            order = list(commit) if i % 2 == 0 else list(reversed(commit))
            for name in order:
                began = time.monotonic()
                commit[name](i)
                seconds[name].append(time.monotonic() - began)
            print(f"commit {i + 1}/{commits}", flush=True)
    medians = {name: statistics.median(s[WARM_UP_COMMITS:]) for name, s in seconds.items()}
    return {
        "run": stamp,
        "machine": "2 cores, 24 GiB",
        "commits": commits,
        "rows": rows,
        "warm_up_commits": WARM_UP_COMMITS,
        **{
            name: {
                "median_seconds": round(median, 3),
                "ratio_to_append_new": round(median / medians["append_new"], 2),
            }
            for name, median in medians.items()
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        allow_abbrev=False,
        prog="python -m bench.delta_commits",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--commits", type=int, default=16)
    parser.add_argument("--rows", type=int, default=30)
    args = parser.parse_args()
    if args.commits <= WARM_UP_COMMITS:
        parser.error(f"--commits must be more than {WARM_UP_COMMITS}")
    if args.rows < 2:
        parser.error("--rows must be at least 2")
    result = run(args.commits, args.rows)
    save_results("delta_commits", result["run"], result)


if __name__ == "__main__":
    main()
