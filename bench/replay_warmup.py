"""Where a replay in a fresh JVM (as the kappa_replay DAG runs one) loses time to one that
runs warm: the same replay twice in one new process, with the JVM's own counters.

    .venv/bin/python -m bench.replay_warmup [--events 10000000] [--topic TOPIC]

Steps: load --events into a fresh topic (bench.speed_layer.load_topic; or read an existing
--topic, e.g. one bench.replay left), start Spark, replay from earliest into version w1,
then again into w2. Per replay: its seconds, and what the JVM spent meanwhile: JIT
compilation (the compiler threads' time, which competes with the tasks for the two cores),
garbage collection, Spark's query code generation (compilations and their mean time),
classes loaded. The load and Spark's start are not timed. Results are printed and written
to bench/results/replay_warmup-<timestamp>.json.
"""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from typing import Any

from bench.replay import timed_replay
from bench.report import save_results
from bench.speed_layer import bench_settings, load_topic
from lakehouse.core.kafka_io import ensure_topic
from lakehouse.core.spark import get_spark


def jvm_counters(spark: Any) -> dict[str, float]:
    jvm = spark.sparkContext._jvm
    beans = jvm.java.lang.management.ManagementFactory
    codegen = jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME()
    return {
        "jit_seconds": beans.getCompilationMXBean().getTotalCompilationTime() / 1000,
        "gc_seconds": sum(b.getCollectionTime() for b in beans.getGarbageCollectorMXBeans()) / 1000,
        "classes_loaded": beans.getClassLoadingMXBean().getTotalLoadedClassCount(),
        "codegen_compilations": codegen.getCount(),
        "codegen_seconds": codegen.getCount() * codegen.getSnapshot().getMean() / 1000,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        allow_abbrev=False,
        prog="python -m bench.replay_warmup",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--events", type=int, default=10_000_000)
    parser.add_argument("--topic", help="replay this existing topic instead of loading one")
    args = parser.parse_args()

    run = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    topic = args.topic or f"bench-warmup-{run.lower()}"
    settings = bench_settings("local", topic, f"replay-warmup-{run}")
    spark = get_spark("bench-replay-warmup", settings)
    if not args.topic:
        print(f"==> loading {args.events} events into {topic}", flush=True)
        ensure_topic(settings)
        load_topic(spark, settings, args.events)
    results: dict[str, Any] = {"run": run, "topic": topic, "machine": "2 cores, 24 GiB"}
    for version in ("w1", "w2"):
        print(f"==> replay {version} from earliest", flush=True)
        before = jvm_counters(spark)
        seconds, records = timed_replay(spark, settings, topic, version, None)
        after = jvm_counters(spark)
        got = {
            "seconds": round(seconds, 1),
            "records": records,
            **{k: round(after[k] - before[k], 1) for k in after},
        }
        results[version] = got
        print(f"    {got}", flush=True)
    save_results("replay_warmup", run, results)


if __name__ == "__main__":
    main()
