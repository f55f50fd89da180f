"""Every socket our services and Spark listen on is on loopback (127.0.0.1 / ::1)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

from lakehouse.core.paths import state_dir

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

LOOPBACK = re.compile(r"^(127\.\d+\.\d+\.\d+|\[::1\]|\[::ffff:127\.\d+\.\d+\.\d+\]):\d+$")


def descendants(root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = {root}, [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def listening() -> list[tuple[str, set[int]]]:
    out = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True).stdout
    sockets = []
    for line in out.splitlines():
        address = line.split()[3]
        pids = {int(p) for p in re.findall(r"pid=(\d+)", line)}
        sockets.append((address, pids))
    return sockets


def test_services_and_spark_listen_on_loopback_only(
    spark: SparkSession, kafka_up: str, minio_up: str, airflow_up: str
) -> None:
    ours: set[int] = set()
    for pid_file in (state_dir() / "run").glob("*.pid"):
        ours |= descendants(int(pid_file.read_text()))
    spark_jvm = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()  # type: ignore[union-attr]
    ours.add(int(spark_jvm))
    checked = [(addr, pids) for addr, pids in listening() if pids & ours]
    assert len(checked) >= 5, f"expected Kafka, MinIO, Airflow and Spark sockets, saw {checked}"
    exposed = [addr for addr, _ in checked if not LOOPBACK.match(addr)]
    assert not exposed, f"listening beyond loopback: {exposed}"
