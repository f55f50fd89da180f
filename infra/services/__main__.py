"""Start, stop and report the embedded services.

    python -m infra.services up     [SERVICE ...] [--record FILE]
    python -m infra.services down   [SERVICE ...] [--only-recorded FILE]
    python -m infra.services status
    python -m infra.services airflow ARGS...   # the Airflow CLI, against our Airflow
    python -m infra.services chain  # unpause the DAGs of the automatic chain (make demo)

SERVICE: kafka, postgres, connect, minio, airflow (default: all, in this order; `down` stops
them in the reverse order). The loopback cluster's services (docs/cluster.md) start only when
named: spark-cluster, kafka-cluster, minio-cluster (`make cluster-up`).

`--record` writes the names this call actually started, and `--only-recorded` stops just
those: `make test` uses the pair so it stops what it started and leaves the rest running.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

from infra.services.airflow import Airflow, airflow_bin
from infra.services.base import Context, Service
from infra.services.connect import Connect
from infra.services.kafka import Kafka
from infra.services.kafka_cluster import KafkaCluster
from infra.services.minio import Minio
from infra.services.minio_cluster import MinioCluster
from infra.services.postgres import Postgres
from infra.services.spark_cluster import SparkCluster
from lakehouse.cdc.supervisor import ChangelogSupervisor
from lakehouse.commerce.supervisor import CommerceSupervisor
from lakehouse.core.config import ConfigError, get_settings
from lakehouse.core.paths import state_dir
from lakehouse.core.processes import ServiceError
from lakehouse.joins.supervisor import EnrichmentSupervisor
from lakehouse.joins.windowed_supervisor import StreamJoinsSupervisor
from lakehouse.speed.supervisor import SpeedLayerSupervisor, StreamSupervisor

# The DAGs that keep the platform running by themselves (docs/operations.md): the stream up,
# the hourly batch layer, and the quality checks and reconciliation after each batch run or
# replay, the nightly maintenance, and the daily replay (which acts in kappa mode only). Every
# DAG starts paused; `make demo` unpauses these.
CHAIN = ["speed_layer", "batch_layer", "data_quality", "reconcile", "maintenance", "kappa_replay"]

ORDER: dict[str, Callable[[Context], Service]] = {
    "kafka": Kafka,
    "postgres": Postgres,
    "connect": Connect,
    "minio": Minio,
    "airflow": Airflow,
}
# The loopback cluster (docs/cluster.md): never part of "all", started only when named.
CLUSTER: dict[str, Callable[[Context], Service]] = {
    "kafka-cluster": KafkaCluster,
    "minio-cluster": MinioCluster,
    "spark-cluster": SparkCluster,
}


def services(names: list[str]) -> list[Service]:
    ctx = Context(settings=get_settings(), state=state_dir())
    return [{**ORDER, **CLUSTER}[name](ctx) for name in (names or list(ORDER))]


def up(names: list[str], record: Path | None) -> None:
    started = []
    for svc in services(names):
        if svc.running() and svc.healthy():
            print(f"==> {svc.name}: already running at {svc.address()}")
            continue
        if svc.running():
            print(f"==> {svc.name}: running but not healthy; restarting it")
            svc.stop()
        print(f"==> {svc.name}: starting", flush=True)
        began = time.monotonic()
        try:
            svc.start()
        except BaseException:
            svc.stop()
            raise
        finally:
            if record is not None and svc.running():
                started.append(svc.name)
                record.write_text("\n".join(started) + "\n")
        print(f"    {svc.name} is up at {svc.address()} ({time.monotonic() - began:.0f}s)")


def down(names: list[str], recorded: Path | None) -> None:
    if recorded is not None:
        names = recorded.read_text().split() if recorded.exists() else []
        if not names:
            print("==> nothing was started by this run; leaving services as they are")
            return
    if "airflow" in (names or list(ORDER)):
        stop_supervised_stream(SpeedLayerSupervisor(get_settings()))
        stop_supervised_stream(ChangelogSupervisor(get_settings()))
        stop_supervised_stream(EnrichmentSupervisor(get_settings()))
        stop_supervised_stream(CommerceSupervisor(get_settings()))
        stop_supervised_stream(StreamJoinsSupervisor(get_settings()))
    for svc in reversed(services(names)):
        print(f"==> {svc.name}: {'stopped' if svc.stop() else 'was not running'}")
    if recorded is not None:
        recorded.unlink(missing_ok=True)


def stop_supervised_stream(supervisor: StreamSupervisor) -> None:
    """A stream Airflow keeps running (the speed_layer and cdc DAGs) is a process of its own,
    which would outlive Airflow: it goes first, while Kafka and storage still answer, so that
    it ends after its running batch, as a stop from the DAG would."""
    if supervisor.status().running:
        title = supervisor.stream.title.removeprefix("the ")
        print(f"==> {title} (kept running by Airflow): stopping after its running batch")
        supervisor.stop()
        print(f"==> {title}: stopped")


def status() -> bool:
    all_ok = True
    for svc in services([]):
        pids = {p.name: p.pid() for p in svc.procs()}
        if not any(pids.values()):
            state = "stopped"
        elif not all(pids.values()):
            dead = ", ".join(n for n, pid in pids.items() if pid is None)
            state = f"DEGRADED ({dead} not running)"
        else:
            state = "running, healthy" if svc.healthy() else "running, NOT HEALTHY"
        all_ok = all_ok and state == "running, healthy"
        print(f"{svc.name:8} {state:32} {svc.address():28} logs: {svc.procs()[0].log_file}")
    return all_ok


def unpause_chain(dag_ids: list[str]) -> None:
    print("==> airflow: unpausing the automatic chain", flush=True)
    Airflow(Context(settings=get_settings(), state=state_dir())).unpause(dag_ids)


def airflow_cli(args: list[str]) -> None:
    """Run `airflow ARGS` with the environment our Airflow runs with (its home, database,
    keys, DAG folder): a bare `airflow` looks at ~/airflow, an empty database it offers to
    migrate. Replaces this process, so the command's output and exit status are its own."""
    import os

    airflow = Airflow(Context(settings=get_settings(), state=state_dir()))
    os.execve(airflow_bin(), [airflow_bin(), *args], airflow.env())


def main(argv: list[str]) -> int:
    # Options only as spelt: an abbreviation silently taken for another option misleads.
    # A subcommand's parser does not inherit the setting, hence each add_parser's own.
    parser = argparse.ArgumentParser(prog="python -m infra.services", allow_abbrev=False)
    sub = parser.add_subparsers(dest="command", required=True)
    for command in ("up", "down"):
        p = sub.add_parser(command, allow_abbrev=False)
        p.add_argument(
            "names",
            nargs="*",
            metavar="SERVICE",
            help=f"any of {', '.join([*ORDER, *CLUSTER])} (default: {', '.join(ORDER)})",
        )
    sub.choices["up"].add_argument("--record", type=Path)
    sub.choices["down"].add_argument("--only-recorded", type=Path)
    sub.add_parser("status", allow_abbrev=False)
    sub.add_parser("chain", allow_abbrev=False)
    cli = sub.add_parser("airflow", allow_abbrev=False, add_help=False)
    cli.add_argument("args", nargs=argparse.REMAINDER, help="passed to the airflow command")
    args = parser.parse_args(argv)
    for name in getattr(args, "names", []):
        if name not in ORDER and name not in CLUSTER:
            parser.error(f"unknown service {name!r}; choose from {', '.join([*ORDER, *CLUSTER])}")
    try:
        if args.command == "up":
            up(args.names, args.record)
        elif args.command == "down":
            down(args.names, args.only_recorded)
        elif args.command == "airflow":
            airflow_cli(args.args)
        elif args.command == "chain":
            unpause_chain(CHAIN)
        else:
            return 0 if status() else 3
    except (ServiceError, ConfigError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
