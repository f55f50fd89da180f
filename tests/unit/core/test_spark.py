"""The SparkSession factory's settings, checked without starting a JVM."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from infra.test_env import TEST_JAVA_OPTIONS
from lakehouse.core.config import load_settings
from lakehouse.core.paths import spark_jars_dir, state_dir
from lakehouse.core.spark import (
    SparkSetupError,
    class_archive,
    driver_class_path,
    driver_java_options,
    get_spark,
    spark_conf,
)
from tests.ports import closed_port


def settings(tmp_path: Path, profile: str, **env: str):
    return load_settings(profile=profile, environ={"TRIBUTARY_CACHE": str(tmp_path), **env})


def jars(tmp_path: Path) -> Path:
    folder = tmp_path / "jars"
    folder.mkdir()
    for name in ("delta-spark_4.1_2.13-4.4.0.jar", "hadoop-aws-3.4.2.jar"):
        (folder / name).touch()
    return folder


def test_local_profile_has_delta_and_jars_but_no_s3a(tmp_path: Path) -> None:
    conf = spark_conf(settings(tmp_path, "local"), jars(tmp_path))
    assert conf["spark.sql.extensions"] == "io.delta.sql.DeltaSparkSessionExtension"
    assert conf["spark.sql.catalog.spark_catalog"].endswith("DeltaCatalog")
    assert conf["spark.master"] == "local[*]"
    assert conf["spark.jars"].endswith(
        "delta-spark_4.1_2.13-4.4.0.jar," + str(tmp_path / "jars" / "hadoop-aws-3.4.2.jar")
    )
    assert not any(key.startswith("spark.hadoop.fs.s3a") for key in conf)
    assert conf["spark.driver.bindAddress"] == "127.0.0.1"


def test_minio_profile_configures_s3a_path_style_with_the_credentials(tmp_path: Path) -> None:
    conf = spark_conf(
        settings(tmp_path, "minio", TRIBUTARY_S3_ACCESS_KEY="ak", TRIBUTARY_S3_SECRET_KEY="sk"),
        jars(tmp_path),
    )
    assert conf["spark.hadoop.fs.s3a.endpoint"] == "http://127.0.0.1:9000"
    assert conf["spark.hadoop.fs.s3a.path.style.access"] == "true"
    assert conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] == "false"
    assert conf["spark.hadoop.fs.s3a.access.key"] == "ak"
    assert conf["spark.hadoop.fs.s3a.secret.key"] == "sk"


def test_s3_without_credentials_says_how_to_get_them(tmp_path: Path) -> None:
    with pytest.raises(SparkSetupError, match="make setup"):
        spark_conf(settings(tmp_path, "minio"), jars(tmp_path))


def test_master_and_extra_conf_come_from_config(tmp_path: Path) -> None:
    conf = spark_conf(
        settings(
            tmp_path,
            "local",
            TRIBUTARY__SPARK__MASTER="spark://h:7077",
            TRIBUTARY__SPARK__JAVA_OPTIONS="-Xss2m",
            **{"TRIBUTARY__SPARK__CONF__spark.executor.cores": "2"},
        ),
        jars(tmp_path),
    )
    assert conf["spark.master"] == "spark://h:7077"
    java = conf["spark.driver.extraJavaOptions"]
    assert java.startswith("-XX:+UseParallelGC ") and java.endswith(" -Xss2m"), java
    assert "spark.driver.host" not in conf, "executors must be able to reach the driver"
    assert conf["spark.executor.cores"] == "2"


def test_delta_rebuilds_table_state_with_the_configured_tasks(tmp_path: Path) -> None:
    folder = jars(tmp_path)
    local = spark_conf(settings(tmp_path, "local"), folder)
    assert local["spark.databricks.delta.snapshotPartitions"] == "1"
    assert local["spark.sql.shuffle.partitions"] == "4", "the log's tasks are set on their own"
    override = spark_conf(
        settings(tmp_path, "local", TRIBUTARY__SPARK__DELTA_LOG_TASKS="3"), folder
    )
    assert override["spark.databricks.delta.snapshotPartitions"] == "3"


def test_the_warehouse_folder_is_in_the_state_folder_not_the_working_folder(
    tmp_path: Path,
) -> None:
    conf = spark_conf(settings(tmp_path, "local"), jars(tmp_path))
    assert conf["spark.sql.warehouse.dir"] == str(state_dir() / "spark-warehouse")


def test_a_session_that_cannot_start_is_one_clear_error(tmp_path: Path) -> None:
    # In a process of its own: here a session may be running already, and it would be reused.
    script = (
        "from lakehouse.core.spark import SparkSetupError, get_spark\n"
        "try:\n"
        "    get_spark('x', overrides={'spark.driver.memory': '1k'})\n"
        "except SparkSetupError as err:\n"
        "    print('SparkSetupError:', err)\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", script],
        cwd=Path(__file__).parents[3],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert "SparkSetupError: Spark did not start" in run.stdout, run.stdout
    assert "JAVA_GATEWAY_EXITED" in run.stdout and "Traceback" not in run.stderr


@pytest.mark.parametrize(
    ("address", "why"),
    [
        (lambda: f"127.0.0.1:{closed_port()}", "Connection refused"),
        (lambda: "nohost.invalid:7077", "nohost.invalid:7077: "),
    ],
)
def test_a_standalone_master_that_does_not_answer_is_named_before_spark_starts(
    tmp_path: Path, address: Callable[[], str], why: str
) -> None:
    """Without the check Spark retries for about a minute, then fails in Java lines. The
    check comes before the JVM: a session already running in this process is not reused."""
    master = f"spark://{address()}"
    with pytest.raises(SparkSetupError) as raised:
        get_spark("x", settings(tmp_path, "local", TRIBUTARY__SPARK__MASTER=master))
    message = str(raised.value)
    assert message.startswith(f"the Spark master {master} does not answer (")
    assert why in message and "TRIBUTARY__SPARK__MASTER" in message


def test_a_driver_maps_the_class_archive_setup_made(spark, driver_settings) -> None:
    """`make setup` archives the driver's classes; every session started here maps that
    file, and a JVM that cannot use it (none made, another JDK) starts without it."""
    archive = class_archive(spark_jars_dir())
    assert archive.exists(), f"{archive} is missing: run `make setup`"
    jvm = spark.sparkContext._gateway.proc.pid
    assert str(archive) in Path(f"/proc/{jvm}/maps").read_text()
    assert driver_java_options(archive.with_name("none.jsa")) == ""
    assert driver_java_options(archive).startswith(f"-XX:SharedArchiveFile={archive} ")
    written = driver_java_options(archive, dump=True)
    assert written.startswith(f"-XX:ArchiveClassesAtExit={archive} ")
    conf = spark_conf(load_settings(profile="local"), java_options="-Xfoo")
    assert " -Xfoo" in conf["spark.driver.extraJavaOptions"]
    cmdline = Path(f"/proc/{jvm}/cmdline").read_text().split("\0")
    options = TEST_JAVA_OPTIONS.split()
    c1_only = set(options) <= set(driver_settings.spark.java_options.split())
    assert all((o in cmdline) == c1_only for o in options), "the driver's settings reach its JVM"


def test_a_driver_on_c1_only_keeps_the_code_cache_of_both_compilers(spark) -> None:
    """C1 alone would get a 48 MB code cache, which Spark and Delta fill within minutes (the
    JVM then flushes and recompiles, or stops compiling): docs/testing.md."""
    jvm = spark.sparkContext._jvm
    bean_class = jvm.java.lang.Class.forName("com.sun.management.HotSpotDiagnosticMXBean")
    bean = jvm.java.lang.management.ManagementFactory.getPlatformMXBean(bean_class)
    reserved = int(bean.getVMOption("ReservedCodeCacheSize").getValue())
    assert reserved >= 240 * 1024 * 1024, f"{reserved} bytes"


def test_the_driver_looks_in_its_busiest_jars_first(tmp_path: Path) -> None:
    """Spark, Scala and Delta's jars before the rest, pyspark's in HOT_PYSPARK_JARS order,
    then ours; no other jar is moved."""
    pyspark_jars = tmp_path / "pyspark-jars"
    pyspark_jars.mkdir()
    names = ("avro-1.12.0.jar", "scala-library-2.13.17.jar", "spark-core_2.13-4.1.3.jar",
             "spark-catalyst_2.13-4.1.3.jar", "spark-sql-api_2.13-4.1.3.jar",
             "spark-sql_2.13-4.1.3.jar", "zstd-jni-1.5.6.jar")  # fmt: skip
    for name in names:
        (pyspark_jars / name).touch()
    own = sorted(jars(tmp_path).glob("*.jar"))
    listed = driver_class_path(own, pyspark_jars).split(":")
    assert [Path(j).name for j in listed] == [
        "spark-catalyst_2.13-4.1.3.jar",
        "spark-sql_2.13-4.1.3.jar",
        "spark-core_2.13-4.1.3.jar",
        "spark-sql-api_2.13-4.1.3.jar",
        "scala-library-2.13.17.jar",
        "delta-spark_4.1_2.13-4.4.0.jar",
    ]
    conf = spark_conf(settings(tmp_path, "local"), tmp_path / "jars")
    assert (
        conf["spark.driver.extraClassPath"].split(":")[0].endswith("/spark-catalyst_2.13-4.1.3.jar")
    )


def test_a_driver_s_class_path_begins_with_those_jars_and_python_skips_call_sites(spark) -> None:
    """What the settings do in a running driver: Delta's classes come from the class path's
    front, not after all of pyspark's jars; PySpark does not hand the JVM the Python call
    site of every column function."""
    from pyspark.errors.utils import is_debugging_enabled

    jvm = spark.sparkContext._jvm
    class_path = [Path(j).name for j in jvm.System.getProperty("java.class.path").split(":")]
    assert class_path[0].startswith("spark-catalyst_"), class_path[:10]
    delta = jvm.Class.forName("io.delta.tables.DeltaTable").getProtectionDomain()
    found_in = Path(delta.getCodeSource().getLocation().getPath()).name
    assert class_path.index(found_in) < 10, (found_in, class_path[:12])
    assert not is_debugging_enabled()
