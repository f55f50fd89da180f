"""The cost of enforcing the contract's JSON types: parse and validate, typed against text.

    .venv/bin/python -m bench.parse_types [--events 10000000 1000000] [--rounds 2]
                                          [--baseline-commit 27d0f49] [--baseline-reads-bytes]

Today each field is read as a JSON VARIANT (lakehouse.transforms.parse), so `"user_id": 12345`
is wrong_type:user_id and `"amount": "9.99"` wrong_type:amount. The baseline is the parse and
validation of `--baseline-commit` (the last commit before the change: `json_tuple`, every
field as text, types not enforced), loaded from git into this process and timed in the same
SparkSession on the same records.

Per size, --events synthetic events (bench.synthetic) are written once, untimed, as bronze
rows (value as bytes) in Parquet under /tmp/tributary-bench/. Then --rounds times, each of
the four in turn: the baseline's parse, today's parse, the baseline's parse + validate
(keeping the accepted events), today's. Each computes every column of every row and writes
nothing (Spark's no-op sink). Results are printed and written to
bench/results/parse_types-<timestamp>.json, with today's wall and JVM CPU time as multiples
of the baseline's (the CPU time varies less on a busy machine).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import types
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MODULES = ("lakehouse/transforms/parse.py", "lakehouse/transforms/validate.py")


def load_baseline(commit: str) -> tuple[Any, Any]:
    """The parse and validate modules as they were at `commit`, imported apart from today's."""
    loaded = []
    for path in MODULES:
        source = subprocess.run(
            ["git", "-C", str(ROOT), "show", f"{commit}:{path}"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        name = "baseline_" + Path(path).stem
        module = types.ModuleType(name)
        sys.modules[name] = module  # dataclasses look their module up while being defined
        exec(compile(source, f"{commit}:{path}", "exec"), module.__dict__)
        loaded.append(module)
    return loaded[0], loaded[1]


def write_bronze(spark: Any, events: int, path: str) -> None:
    """`events` bronze rows, value as bytes, over one hour of event time."""
    from pyspark.sql import functions as F

    from bench.synthetic import event_json, event_type, page

    n = F.col("id")
    fields = spark.range(events, numPartitions=8).select(
        n,
        F.concat(F.lit("u"), (n * 7919 % 20000).cast("string")).alias("user_id"),
        F.concat(F.lit("e"), n.cast("string")).alias("event_id"),
        event_type(n).alias("event_type"),
        page(n).alias("page"),
        F.timestamp_micros(F.lit(1_780_000_000_000_000) + n * (3_600_000_000 // events)).alias("t"),
    )
    fields.select(
        F.col("user_id").cast("binary").alias("key"),
        event_json().cast("binary").alias("value"),
        F.lit("events").alias("topic"),
        (n % 3).cast("int").alias("partition"),
        (n / 3).cast("long").alias("offset"),
        (F.col("t") + F.expr("INTERVAL 2 SECONDS")).alias("kafka_timestamp"),
        F.col("t").alias("ingested_at"),
    ).write.mode("overwrite").parquet(path)


def jvm_cpu_seconds(spark: Any) -> float:
    """User and system CPU time of the driver's JVM (local mode: its tasks too) so far."""
    pid = spark.sparkContext._jvm.ProcessHandle.current().pid()
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def discard(df: Any) -> tuple[float, float]:
    """Wall seconds and the JVM's CPU seconds to compute every row of `df`: on a busy machine
    the CPU time of the same work varies less than its wall time."""
    began, cpu = time.monotonic(), jvm_cpu_seconds(df.sparkSession)
    df.write.format("noop").mode("overwrite").save()
    return time.monotonic() - began, jvm_cpu_seconds(df.sparkSession) - cpu


def main() -> None:
    from bench.report import save_results
    from lakehouse.core.config import load_settings
    from lakehouse.core.spark import get_spark
    from lakehouse.transforms import parse, validate
    from lakehouse.transforms.validate import ValidationRules

    parser = argparse.ArgumentParser(
        allow_abbrev=False,
        prog="python -m bench.parse_types",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--events", type=int, nargs="+", default=[10_000_000, 1_000_000])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--baseline-commit", default="27d0f49")
    parser.add_argument(
        "--baseline-reads-bytes",
        action="store_true",
        help="the baseline commit parses the value as bytes, as today (27d0f49 read text)",
    )
    args = parser.parse_args()

    run = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    spark = get_spark("bench-parse-types", load_settings("local"))
    old_parse, old_validate = load_baseline(args.baseline_commit)
    settings_rules = ValidationRules(max_record_bytes=65536, future_tolerance_seconds=300)
    old_rules = old_validate.ValidationRules(65536, 300)

    def old_pipeline(raw: Any, validated: bool) -> Any:
        # 27d0f49 read string values: bronze held them as text.
        value = raw["value"] if args.baseline_reads_bytes else raw["value"].cast("string")
        parsed = raw.withColumn("value", value).transform(old_parse.parse_events)
        if not validated:
            return parsed
        return old_validate.accepted_events(old_validate.validate_events(parsed, old_rules))

    def new_pipeline(raw: Any, validated: bool) -> Any:
        parsed = raw.transform(parse.parse_events)
        if not validated:
            return parsed
        return validate.accepted_events(validate.validate_events(parsed, settings_rules))

    results: dict[str, Any] = {
        "run": run,
        "baseline_commit": args.baseline_commit,
        "baseline_reads_bytes": args.baseline_reads_bytes,
        "machine": "2 cores, 24 GiB",
        "sizes": {},
    }
    for events in args.events:
        path = f"/tmp/tributary-bench/parse_types-{run}/bronze-{events}"
        print(f"==> writing {events} bronze rows to {path}", flush=True)
        write_bronze(spark, events, path)
        raw = spark.read.parquet(path)
        accepted = new_pipeline(raw, True).count()
        assert accepted == events == old_pipeline(raw, True).count(), accepted
        rounds = []
        for round_ in range(1, args.rounds + 1):
            got: dict[str, float] = {}
            for step, validated in (("parse", False), ("parse_validate", True)):
                print(f"==> {events}: round {round_}: {step}", flush=True)
                for side, pipeline in (("baseline", old_pipeline), ("typed", new_pipeline)):
                    wall, cpu = discard(pipeline(raw, validated))
                    got[f"{side}_{step}_seconds"] = round(wall, 2)
                    got[f"{side}_{step}_cpu_seconds"] = round(cpu, 2)
                for measure in ("seconds", "cpu_seconds"):
                    got[f"{step}_{measure}_x_baseline"] = round(
                        got[f"typed_{step}_{measure}"] / got[f"baseline_{step}_{measure}"], 2
                    )
                got[f"typed_{step}_extra_ns_per_record"] = round(
                    (got[f"typed_{step}_seconds"] - got[f"baseline_{step}_seconds"]) * 1e9 / events
                )
            print(f"    {got}", flush=True)
            rounds.append(got)
        results["sizes"][str(events)] = rounds
    save_results("parse_types", run, results)


if __name__ == "__main__":
    main()
