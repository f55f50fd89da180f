"""How the speed layer's catch-up and the batch recompute scale from one worker to two, on the
loopback cluster `make cluster-up` starts (docs/cluster.md).

    make cluster-up
    .venv/bin/python -m bench.cluster_scaling [--events 200000] [--rounds 2]
                                              [--max-offsets-per-trigger 100000]
                                              [--max-load 2.5] [--load-wait-minutes 20] [--keep]

Steps:
1. load: write --events JSON events, spread over the hour before now, into a fresh topic on the
   cluster's brokers with Spark's Kafka writer (bench.speed_layer.load_topic, in a local[2]
   session of this process, stopped before anything is measured);
2. wait, at most --load-wait-minutes, until the machine's 1-minute load average is below
   --max-load (it is shared: another engineer's tests may be running);
3. --rounds times, each setting once per round, the order turned each round (one worker
   first, then two; then two first): one worker is the application limited to one executor
   (`spark.cores.max=1`), two workers to two (`spark.cores.max=2`: the master spreads an
   application's cores over the workers, one executor on each). Each run starts fresh
   driver processes on the cluster (`spark://`), into a lakehouse of its own on the
   cluster's MinIO:
   - `python -m jobs.speed_layer --available-now` over the whole topic. Its catch-up rate is
     the events its micro-batches read (ops.speed_progress, input_rows) over the time from
     its first batch's start to its last batch's end (each row's processed_at, less the first
     one's duration_seconds): session start, the query's start and the driver's exit are left
     out. The job's wall time from its "running" line to its exit is reported beside it;
   - `python -m jobs.batch_layer` over the whole minutes that hold the events, reading the
     bronze that speed layer wrote: the recompute's own seconds (its result line's
     "seconds", session start left out), its wall time beside it.
   During each job the master's /json/ is read twice a second: the cores its application held
   (activeapps[].cores); after it, the workers' /json/ name the executors each started for it.
   A run whose application did not hold as many cores, in as many executors on as many
   workers, as its setting says is reported as such (executors_as_set false). Where the CPU
   went is read from /proc at the same time: the CPU seconds of the job's driver, of its
   executors, of the brokers, MinIO and the Spark daemons, and "others" (the rest of what the
   machine spent meanwhile: this bench, anyone else's processes), with the share of the
   machine's cores busy over the job's wall time.
The figures are the medians over the rounds per setting, and the ratios two workers / one
worker for the catch-up rate and one worker / two workers for the batch time (above 1: two
workers are faster). Driver, executors, the 3 brokers and MinIO all share this machine's 2
cores. The load average is recorded before the first run and after the last (both include
this bench's own processes), and before each run. The topic and the run's lakehouses are
deleted at the end (`make clean-bench` does not reach the cluster's services), unless --keep.
Results go to bench/results/cluster_scaling-<timestamp>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.report import save_results
from infra.services.base import Context
from infra.services.kafka_cluster import KafkaCluster
from infra.services.minio_cluster import MinioCluster
from infra.services.spark_cluster import SparkCluster
from jobs.contract import read_result
from lakehouse.core.config import Settings, load_settings
from lakehouse.core.paths import REPO_ROOT, state_dir

# Each setting's spark.cores.max: the master spreads an application's cores over the workers,
# one executor of one core on each.
SETTINGS = {"one_worker": 1, "two_workers": 2}
LOCAL = Path("/tmp/tributary-bench")


def cluster_or_exit(settings: Settings) -> SparkCluster:
    """The loopback cluster's Spark, if its master lists every worker alive; else exit."""
    spark = SparkCluster(Context(settings=settings, state=state_dir()))
    if not spark.healthy():
        workers = len(settings.cluster.spark_worker_ports)
        raise SystemExit(
            f"bench.cluster_scaling: no Spark master with {workers} ALIVE workers at "
            f"{spark.web_url()}/json/; run `make cluster-up` first"
        )
    return spark


def cluster_daemons(settings: Settings) -> dict[str, list[int]]:
    """The pids of the loopback cluster's brokers, MinIO and Spark master and workers."""
    ctx = Context(settings=settings, state=state_dir())
    return {
        role: [pid for proc in service(ctx).procs() if (pid := proc.pid()) is not None]
        for role, service in (
            ("kafka", KafkaCluster),
            ("minio", MinioCluster),
            ("spark_daemons", SparkCluster),
        )
    }


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def wait_for_quiet(max_load: float, minutes: float) -> dict[str, Any]:
    """Wait until the 1-minute load average is below `max_load`, at most `minutes`."""
    began = time.monotonic()
    deadline = began + minutes * 60
    while os.getloadavg()[0] >= max_load and time.monotonic() < deadline:
        print(f"    load average {load_average()}, waiting for < {max_load}", flush=True)
        time.sleep(30)
    quiet = os.getloadavg()[0] < max_load
    if not quiet:
        print(f"    still {load_average()} after {minutes} minutes: measuring anyway", flush=True)
    return {
        "max_load": max_load,
        "waited_seconds": round(time.monotonic() - began),
        "reached": quiet,
    }


def run_environment(base: dict[str, str], root: str, topic: str, cores: int) -> dict[str, str]:
    """A job's environment: the cluster profile, its own lakehouse, the bench topic, the cores."""
    return {
        **base,
        "TRIBUTARY_PROFILE": "cluster",
        "TRIBUTARY__STORAGE__ROOT": f"{root}/lakehouse",
        "TRIBUTARY__STORAGE__CHECKPOINTS": f"{root}/checkpoints",
        "TRIBUTARY__KAFKA__TOPIC": topic,
        "TRIBUTARY__SPARK__CONF__spark.cores.max": str(cores),
        "PYTHONUNBUFFERED": "1",
    }


TICK = os.sysconf("SC_CLK_TCK")
# A process's CPU time is its last sample's: one that ends (a driver, an executor) loses up
# to this much, which counts as the machine's "others".
POLL_SECONDS = 0.5


def cpu_ticks() -> dict[int, tuple[int, int]]:
    """Every process's (parent pid, user + system CPU ticks), from /proc."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            # The command name (field 2) may hold spaces: the fields after its ")" are plain.
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # ended meanwhile
        found[int(entry.name)] = (int(fields[1]), int(fields[11]) + int(fields[12]))
    return found


def machine_busy_ticks() -> int:
    """The machine's CPU ticks spent on anything but idling and waiting for I/O."""
    user, nice, system, _idle, _iowait, irq, softirq, steal = map(
        int, Path("/proc/stat").read_text().split("\n")[0].split()[1:9]
    )
    return user + nice + system + irq + softirq + steal


def executor_app(pid: int) -> str | None:
    """The application an executor JVM (CoarseGrainedExecutorBackend) runs for, else None."""
    try:
        args = (Path(f"/proc/{pid}") / "cmdline").read_text().split("\0")
    except OSError:
        return None
    if not any(a.endswith("CoarseGrainedExecutorBackend") for a in args) or "--app-id" not in args:
        return None
    return args[args.index("--app-id") + 1]


@dataclass
class JobWatch:
    """What a job's applications got, read every POLL_SECONDS while it runs: the cores each held
    (the master's /json/, activeapps[].cores), and the CPU time each part of the cluster
    spent (from /proc: the job's driver and the executors of its applications, each with
    the processes they started; the brokers, MinIO and the Spark daemons), against the CPU
    time the whole machine spent. Afterwards, the executors the workers ran for each
    application (their /json/)."""

    spark: SparkCluster
    services: dict[str, list[int]]  # role -> the pids of the cluster's daemons
    driver: int | None = None  # the job's pid, once started
    before: set[str] = field(default_factory=set)
    cores: dict[str, int] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)
    apps_of: dict[int, str | None] = field(default_factory=dict)  # executor pid -> app
    first: dict[int, int] = field(default_factory=dict)  # ticks at the start, of those running
    last: dict[int, tuple[str, int]] = field(default_factory=dict)  # pid -> (role, ticks)
    done: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        state = self.spark.state() or {}
        self.before = {
            a["id"] for key in ("activeapps", "completedapps") for a in state.get(key, [])
        }
        self.first = {pid: ticks for pid, (_, ticks) in cpu_ticks().items()}
        self.began = (time.monotonic(), machine_busy_ticks())
        self.thread = threading.Thread(target=self._poll, daemon=True)
        self.thread.start()

    def _poll(self) -> None:
        while not self.done.wait(POLL_SECONDS):
            for app in (self.spark.state() or {}).get("activeapps", []):
                if app["id"] not in self.before:
                    self.names[app["id"]] = app["name"]
                    self.cores[app["id"]] = max(self.cores.get(app["id"], 0), int(app["cores"]))
            self._sample()

    def _sample(self) -> None:
        ticks = cpu_ticks()
        roles = {pid: role for role, pids in self.services.items() for pid in pids}
        if self.driver is not None:
            roles[self.driver] = "driver"
        for pid in ticks:
            if pid not in self.apps_of:
                self.apps_of[pid] = executor_app(pid)
            if self.apps_of[pid] in self.cores:
                roles[pid] = "executors"
        # Each process counts for its nearest ancestor with a role (an executor's for the
        # executors, not for the worker that started it).
        for pid, (_, spent) in ticks.items():
            ancestor: int | None = pid
            while ancestor is not None and ancestor not in roles:
                ancestor = ticks[ancestor][0] if ancestor in ticks else None
            if ancestor is not None:
                self.last[pid] = (roles[ancestor], spent)

    def stop(self) -> dict[str, Any]:
        self.done.set()
        self.thread.join()
        self._sample()
        seconds = time.monotonic() - self.began[0]
        cpu: dict[str, float] = {}
        for pid, (role, spent) in self.last.items():
            cpu[role] = cpu.get(role, 0.0) + (spent - self.first.get(pid, 0)) / TICK
        busy = (machine_busy_ticks() - self.began[1]) / TICK
        cpu["others"] = busy - sum(cpu.values())
        state = self.spark.state() or {}
        executors: dict[str, list[str]] = {app: [] for app in self.cores}
        for worker in state.get("workers", []):
            with urllib.request.urlopen(f"{worker['webuiaddress']}/json/", timeout=5) as answer:
                found = json.load(answer)
            for ran in found.get("executors", []) + found.get("finishedexecutors", []):
                if ran["appid"] in executors:
                    executors[ran["appid"]].append(f"{worker['id']}/{ran['id']}")
        return {
            "applications": {
                app: {
                    "name": self.names[app],
                    "max_cores": cores,
                    "executors": executors[app],
                    "workers": len({e.split("/")[0] for e in executors[app]}),
                }
                for app, cores in self.cores.items()
            },
            "cpu_seconds": {role: round(spent, 1) for role, spent in sorted(cpu.items())},
            # Of the machine's cores over the job's wall time, how busy they were, with anything.
            "machine_busy_share": round(busy / ((os.cpu_count() or 1) * seconds), 3),
        }


def run_job(
    name: str, args: list[str], env: dict[str, str], log: Path, watch: JobWatch
) -> dict[str, Any]:
    """Run `python -m jobs.<name> ARGS` to its end, watched: its stdout lines, wall time, when
    it said it was running (the speed layer's line after its session started), what `watch`
    saw. Exits the bench if the job failed."""
    began = time.monotonic()
    running = None
    lines = []
    with log.open("w") as stderr:
        job = subprocess.Popen(
            [sys.executable, "-m", f"jobs.{name}", *args],
            env=env,
            cwd=REPO_ROOT,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
        watch.driver = job.pid
        try:
            assert job.stdout is not None
            for line in job.stdout:
                lines.append(line.rstrip("\n"))
                if running is None and " running (query id " in line:
                    running = time.monotonic()
            status = job.wait()
        finally:
            if job.poll() is None:
                job.terminate()
                job.wait(60)
    ended = time.monotonic()
    watched = watch.stop()
    if status != 0:
        tail = "\n".join(log.read_text().splitlines()[-30:])
        raise SystemExit(f"jobs.{name} exited {status} (log {log}):\n{tail}")
    return {
        "lines": lines,
        "wall_seconds": ended - began,
        "after_start_seconds": None if running is None else ended - running,
        "watched": watched,
    }


def speed_catch_up(env: dict[str, str], folder: Path, watch: JobWatch) -> dict[str, Any]:
    from lakehouse.core.small_tables import table_rows
    from lakehouse.speed.outputs import SpeedOutputs

    stop_file = folder / "speed_layer.stop"  # not the shared default one
    args = ["--available-now", "--stop-file", str(stop_file)]
    job = run_job("speed_layer", args, env, folder / "speed_layer.log", watch)
    rows = table_rows(load_settings("cluster", env), SpeedOutputs.live().progress)
    rows = sorted((r for r in rows if r["input_rows"]), key=lambda r: r["batch_id"])
    events = sum(r["input_rows"] for r in rows)
    first = min(r["processed_at"] - timedelta(seconds=r["duration_seconds"]) for r in rows)
    seconds = (max(r["processed_at"] for r in rows) - first).total_seconds()
    after_start = job["after_start_seconds"]
    return {
        "events": events,
        "batches": len(rows),
        "batches_seconds": round(seconds, 1),
        "events_per_second": round(events / seconds),
        "batch_seconds": [round(r["duration_seconds"], 1) for r in rows],
        # Each batch's five longest steps (lakehouse.speed.micro_batch's step_seconds).
        "batch_steps": [
            dict(sorted(((k, round(v, 1)) for k, v in r["step_seconds"].items()), key=_slowest)[:5])
            for r in rows
        ],
        "wall_seconds": round(job["wall_seconds"], 1),
        "after_start_seconds": None if after_start is None else round(after_start, 1),
        "after_start_events_per_second": None
        if after_start is None
        else round(events / after_start),
        **job["watched"],
    }


def _slowest(step: tuple[str, float]) -> float:
    return -step[1]


def batch_recompute(
    env: dict[str, str],
    folder: Path,
    interval: tuple[datetime, datetime],
    run_id: str,
    watch: JobWatch,
) -> dict[str, Any]:
    start, end = interval
    moment = "%Y-%m-%dT%H:%MZ"
    args = ["--start", f"{start:{moment}}", "--end", f"{end:{moment}}", "--run-id", run_id]
    job = run_job("batch_layer", args, env, folder / "batch_layer.log", watch)
    result = read_result("batch", job["lines"])
    if result is None:
        raise SystemExit(f"jobs.batch_layer printed no result line (log {folder})")
    return {
        "events": result["events"],
        "seconds": result["seconds"],
        "wall_seconds": round(job["wall_seconds"], 1),
        **job["watched"],
    }


def executors_as_set(apps: dict[str, Any], cores: int) -> bool:
    """Every application held `cores` cores, in `cores` executors on as many workers."""
    return bool(apps) and all(
        a["max_cores"] == cores and len(a["executors"]) == cores and a["workers"] == cores
        for a in apps.values()
    )


def one_run(
    spark: SparkCluster,
    services: dict[str, list[int]],
    base_env: dict[str, str],
    bucket_root: str,
    topic: str,
    name: str,
    interval: tuple[datetime, datetime],
    run: str,
) -> dict[str, Any]:
    cores = SETTINGS[name.rsplit("-", 1)[0]]
    env = run_environment(base_env, f"{bucket_root}/{name}", topic, cores)
    folder = LOCAL / f"cluster-scaling-{run}" / name
    folder.mkdir(parents=True, exist_ok=True)
    got: dict[str, Any] = {"run": name, "cores_max": cores, "load_average_before": load_average()}
    got["speed"] = speed_catch_up(env, folder, JobWatch(spark, services))
    print(f"    speed layer: {_brief(got['speed'])}", flush=True)
    run_id = f"bench-cluster-scaling-{run}-{name}"
    got["batch"] = batch_recompute(env, folder, interval, run_id, JobWatch(spark, services))
    print(f"    batch layer: {_brief(got['batch'])}", flush=True)
    got["executors_as_set"] = all(
        executors_as_set(got[job]["applications"], cores) for job in ("speed", "batch")
    )
    return got


def _brief(got: dict[str, Any]) -> str:
    apps = got["applications"].values()
    held = ", ".join(f"{a['max_cores']} cores in {len(a['executors'])} executors" for a in apps)
    left_out = ("applications", "batch_steps")
    return json.dumps({k: v for k, v in got.items() if k not in left_out}) + f"; {held}"


def summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per setting, the median over its rounds of each figure; the ratios between them."""
    measures = {
        "catch_up_events_per_second": ("speed", "events_per_second"),
        "catch_up_after_start_events_per_second": ("speed", "after_start_events_per_second"),
        "speed_wall_seconds": ("speed", "wall_seconds"),
        "batch_seconds": ("batch", "seconds"),
        "batch_wall_seconds": ("batch", "wall_seconds"),
    }
    medians: dict[str, dict[str, Any]] = {}
    for setting in SETTINGS:
        mine = [r for r in runs if r["run"].startswith(f"{setting}-")]
        medians[setting] = {
            measure: statistics.median(r[job][key] for r in mine)
            for measure, (job, key) in measures.items()
        }
        for job in ("speed", "batch"):
            roles = sorted({role for r in mine for role in r[job]["cpu_seconds"]})
            medians[setting][f"{job}_cpu_seconds"] = {
                role: statistics.median(r[job]["cpu_seconds"].get(role, 0.0) for r in mine)
                for role in roles
            }
            medians[setting][f"{job}_machine_busy_share"] = statistics.median(
                r[job]["machine_busy_share"] for r in mine
            )
    one, two = medians["one_worker"], medians["two_workers"]
    return {
        "medians": medians,
        "ratios": {
            "catch_up_two_over_one": round(
                two["catch_up_events_per_second"] / one["catch_up_events_per_second"], 3
            ),
            "catch_up_after_start_two_over_one": round(
                two["catch_up_after_start_events_per_second"]
                / one["catch_up_after_start_events_per_second"],
                3,
            ),
            "batch_seconds_one_over_two": round(one["batch_seconds"] / two["batch_seconds"], 3),
            "batch_wall_seconds_one_over_two": round(
                one["batch_wall_seconds"] / two["batch_wall_seconds"], 3
            ),
        },
    }


def load_events(settings: Settings, events: int) -> tuple[float, tuple[datetime, datetime]]:
    """Load the topic in a local[2] session of this process; its rate and the whole minutes
    that hold the events (bench.speed_layer.load_topic spreads them over the hour before)."""
    from bench.speed_layer import load_topic
    from lakehouse.core.spark import get_spark

    began = datetime.now(UTC)
    local = settings.model_copy(
        update={"spark": settings.spark.model_copy(update={"master": "local[2]"})}
    )
    spark = get_spark("bench-cluster-scaling-load", local)
    try:
        rate = load_topic(spark, local, events)
    finally:
        spark.stop()
    start = (began - timedelta(hours=1)).replace(second=0, microsecond=0)
    end = datetime.now(UTC).replace(second=0, microsecond=0) + timedelta(minutes=1)
    return rate, (start, end)


def main() -> None:
    parser = argparse.ArgumentParser(
        allow_abbrev=False,
        prog="python -m bench.cluster_scaling",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--max-offsets-per-trigger", type=int, default=100_000)
    parser.add_argument("--max-load", type=float, default=2.5)
    parser.add_argument("--load-wait-minutes", type=float, default=20.0)
    parser.add_argument("--keep", action="store_true", help="keep the topic and lakehouses")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")

    base_env = {
        **os.environ,
        "TRIBUTARY__SPEED__MAX_OFFSETS_PER_TRIGGER": str(args.max_offsets_per_trigger),
    }
    run = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    topic = f"bench-cluster-scaling-{run.lower()}"
    settings = load_settings("cluster", {**base_env, "TRIBUTARY__KAFKA__TOPIC": topic})
    spark = cluster_or_exit(settings)
    services = cluster_daemons(settings)
    prefix = f"bench/cluster-scaling/{run}/"
    bucket_root = f"s3a://{settings.s3.bucket}/{prefix}".rstrip("/")
    results: dict[str, Any] = {
        "run": run,
        "machine": "2 cores, 24 GiB",
        "shared": (
            "the drivers, the executors, the 3 Kafka brokers and MinIO (and the idle master "
            "and workers) all run on this machine's 2 cores"
        ),
        "master": settings.spark.master,
        "events": args.events,
        "rounds": args.rounds,
        "max_offsets_per_trigger": args.max_offsets_per_trigger,
        "shuffle_partitions": settings.spark.shuffle_partitions,
        "topic": topic,
        "lakehouses": bucket_root,
    }
    try:
        print(f"==> loading {args.events} events into {topic} (3 brokers)", flush=True)
        rate, interval = load_events(settings, args.events)
        results["load_events_per_second"] = round(rate)
        results["interval"] = [f"{t:%Y-%m-%dT%H:%MZ}" for t in interval]
        print(f"==> waiting for the 1-minute load average to be < {args.max_load}", flush=True)
        results["load_wait"] = wait_for_quiet(args.max_load, args.load_wait_minutes)
        time.sleep(max(0.0, (interval[1] - datetime.now(UTC)).total_seconds() + 1))
        results["load_average_start"] = load_average()
        names = list(SETTINGS)
        runs = []
        for index in range(args.rounds):
            order = names[index % len(names) :] + names[: index % len(names)]
            for setting in order:
                print(f"==> round {index + 1}/{args.rounds}: {setting}", flush=True)
                name = f"{setting}-{index + 1}"
                runs.append(
                    one_run(spark, services, base_env, bucket_root, topic, name, interval, run)
                )
        results["load_average_end"] = load_average()
        results["executors_as_set"] = all(r["executors_as_set"] for r in runs)
        results.update(summary(runs))
        results["runs"] = runs
    finally:
        if not args.keep:
            _delete(settings, topic, prefix)
    save_results("cluster_scaling", run, results)
    if not results["executors_as_set"]:
        raise SystemExit("some application did not run with the executors its setting asks for")


def _delete(settings: Settings, topic: str, prefix: str) -> None:
    from lakehouse.core.kafka_io import delete_topics
    from lakehouse.core.storage import delete_prefix

    try:
        delete_topics(settings, topic)
        delete_prefix(settings, prefix)
    except Exception as err:  # the cluster went away: say what is left, keep the real error
        print(f"==> {topic} and s3://{settings.s3.bucket}/{prefix} left: {err}", flush=True)
        return
    print(f"==> deleted topic {topic} and s3://{settings.s3.bucket}/{prefix}", flush=True)


if __name__ == "__main__":
    main()
