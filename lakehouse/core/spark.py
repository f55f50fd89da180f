"""The one SparkSession factory. Every job and every test gets its session here.

Delta, the Kafka connector and S3A are configured only in this module. Their jars come from
the cache folder filled by `make setup` (spark.jars), so starting a session never touches the
network.
"""

from __future__ import annotations

import os
import shutil
import socket
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from lakehouse.core.config import Settings, get_settings
from lakehouse.core.paths import REPO_ROOT, cache_dir, fingerprint, spark_jars_dir, state_dir

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


LOG4J_CONFIG = REPO_ROOT / "infra" / "spark" / "log4j2.properties"


DELTA_LOG_TASKS = "spark.databricks.delta.snapshotPartitions"
BIND_ADDRESS = "spark.driver.bindAddress"
DRIVER_CLASS_PATH = "spark.driver.extraClassPath"
# The jars whose classes a driver looks up all the time, by file name (without version).
# Spark cleans every closure it ships by reading its class file as a resource, and a lookup
# walks the class path a jar at a time; pyspark lists its ~290 jars in no useful order, and
# Delta's jars (spark.jars) come after all of them. These go first.
HOT_PYSPARK_JARS = (
    "spark-catalyst_",
    "spark-sql_",
    "spark-core_",
    "spark-sql-api_",
    "spark-common-utils_",
    "spark-unsafe_",
    "scala-library-",
)
HOT_OWN_JARS = ("delta-spark_", "delta-storage-")


class SparkSetupError(Exception):
    """Spark cannot start here; the message says what to do."""


def spark_conf(
    settings: Settings, jars_dir: Path | None = None, java_options: str = ""
) -> dict[str, str]:
    """Every Spark setting we use, as plain strings (pure, so it can be tested without a JVM).
    `java_options` go to the driver's JVM too (driver_java_options)."""
    jars = sorted((jars_dir or spark_jars_dir()).glob("*.jar"))
    conf = {
        DRIVER_CLASS_PATH: driver_class_path(jars),
        "spark.master": settings.spark.master,
        "spark.driver.memory": settings.spark.driver_memory,
        "spark.jars": ",".join(str(j) for j in jars),
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        "spark.sql.shuffle.partitions": str(settings.spark.shuffle_partitions),
        "spark.sql.session.timeZone": "UTC",
        # Spark makes ./spark-warehouse in whatever folder a job was started from; our tables
        # live at their paths, so this only keeps the working folder clean.
        "spark.sql.warehouse.dir": str(state_dir() / "spark-warehouse"),
        # Delta rebuilds a table's state from its log with this many tasks (default 50).
        DELTA_LOG_TASKS: str(settings.spark.delta_log_tasks),
        "spark.ui.showConsoleProgress": "false",
        # PySpark's DataFrame debugging hands the JVM the Python call site of every column
        # function (F.col, F.when, ...): a dozen JVM round trips each, where the call itself
        # takes two. Our jobs report their errors in their own words, by their own step.
        "spark.python.sql.dataFrameDebugging.enabled": "false",
        # Compiled query code is reused by its text. A micro-batch runs about 200 distinct
        # pieces (Delta's commits included); the default of 100 evicts them all before the
        # next batch.
        "spark.sql.codegen.cache.maxEntries": "4000",
        # Delta 4 refuses to read a version older than the table's deletedFileRetentionDuration
        # (7 days) once a newer one exists, lest a vacuum have deleted its files. We read such
        # versions on purpose and our vacuums keep them (delta_maintenance.retention_keeping):
        # a replay version at its pins, the batch views at their last run, silver as a batch
        # failed a week ago left it.
        "spark.databricks.delta.vacuum.enforceTimeTravelWithinDeletedFileRetentionDuration": (
            "false"
        ),
        # The parallel collector: Spark's row-at-a-time work pays G1's write barriers on
        # every object.
        "spark.driver.extraJavaOptions": (
            f"-XX:+UseParallelGC -Dlog4j2.configurationFile=file:{LOG4J_CONFIG} {java_options} "
            f"{settings.spark.java_options}"
        ).strip(),
    }
    if settings.spark.master.startswith("local"):
        # Nothing outside this machine needs to reach a local driver: keep it on loopback.
        # (With a cluster master, executors must connect back, so the defaults apply.)
        conf.update(
            {
                "spark.driver.bindAddress": "127.0.0.1",
                "spark.driver.host": "127.0.0.1",
            }
        )
    if settings.storage.on_s3:
        conf.update(_s3a_conf(settings))
    conf.update(settings.spark.conf)
    return conf


def driver_class_path(own_jars: list[Path], pyspark_jars: Path | None = None) -> str:
    """The driver's class path before pyspark's own: its most used jars (HOT_PYSPARK_JARS,
    then ours in HOT_OWN_JARS), so that finding one of their classes reads a few jars' indexes
    instead of hundreds. The same jars stay where they were too; the first copy is used."""
    if pyspark_jars is None:
        import pyspark

        # The venv's real folder, the same for every clone (and so for the class archive).
        pyspark_jars = Path(os.path.realpath(Path(pyspark.__file__).parent)) / "jars"
    listed = sorted(pyspark_jars.glob("*.jar"))
    hot = [j for prefix in HOT_PYSPARK_JARS for j in listed if j.name.startswith(prefix)]
    hot += [j for prefix in HOT_OWN_JARS for j in own_jars if j.name.startswith(prefix)]
    return os.pathsep.join(str(j) for j in hot)


def _s3a_conf(settings: Settings) -> dict[str, str]:
    s3 = settings.s3
    if s3.access_key is None or s3.secret_key is None:
        raise SparkSetupError(
            "the lakehouse is on S3 but no credentials are set: run `make setup` to generate "
            "them, or set TRIBUTARY_S3_ACCESS_KEY and TRIBUTARY_S3_SECRET_KEY"
        )
    prefix = "spark.hadoop.fs.s3a."
    return {
        prefix + "impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
        prefix + "endpoint": s3.endpoint,
        prefix + "endpoint.region": s3.region,
        prefix + "path.style.access": str(s3.path_style_access).lower(),
        prefix + "connection.ssl.enabled": str(s3.endpoint.startswith("https")).lower(),
        prefix
        + "aws.credentials.provider": "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
        prefix + "access.key": s3.access_key.get_secret_value(),
        prefix + "secret.key": s3.secret_key.get_secret_value(),
        # One writing driver per table (lakehouse.core.locks) is what makes Delta safe here.
        "spark.delta.logStore.s3a.impl": "io.delta.storage.S3SingleDriverLogStore",
    }


def get_spark(
    app_name: str,
    settings: Settings | None = None,
    overrides: Mapping[str, str] | None = None,
    java_options: str | None = None,
) -> SparkSession:
    """Start (or return the running) SparkSession for this process. `java_options`: the
    driver JVM's class-archive options (driver_java_options); by default, those that use the
    archive `make setup` made."""
    settings = settings or get_settings()
    jars_dir = spark_jars_dir()
    if not (jars_dir / ".complete").exists():
        raise SparkSetupError(f"Spark jars are missing from {jars_dir}: run `make setup`")
    _ensure_java()
    if java_options is None:
        java_options = driver_java_options(class_archive(jars_dir))
    _check_master(settings.spark.master)
    conf = spark_conf(settings, jars_dir, java_options)
    if settings.spark.master.startswith("local") or conf.get(BIND_ADDRESS) == "127.0.0.1":
        # Spark's web UI binds to SPARK_LOCAL_IP, or to every interface without it.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    if not settings.spark.master.startswith("local"):
        # Executors run Python workers with the interpreter the driver names (pyspark sends
        # its PYSPARK_PYTHON, else "python3", which lacks the project's packages): this one,
        # which a cluster on this machine (make cluster-up) has too. Set it for another.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(f"tributary-{app_name}")
    for key, value in {**conf, **(overrides or {})}.items():
        builder = builder.config(key, value)
    try:
        spark = builder.getOrCreate()
    except Exception as err:  # py4j's and pyspark's many types; the JVM's log says more
        first = (str(err).strip().splitlines() or [type(err).__name__])[0][:500]
        raise SparkSetupError(
            f"Spark did not start (master {settings.spark.master}; "
            f"the Java lines above, if any, say why): {first}"
        ) from None
    spark.sparkContext.setLogLevel("WARN")
    _quiet_query_errors()
    _route_jvm_console(spark, jvm_console_log())
    return spark


def get_spark_checked(name: str, settings: Settings | None = None) -> SparkSession:
    """The session, once storage answers: with MinIO down, Spark's S3A retries for minutes
    without a word before it fails (lakehouse.core.storage.StorageError says so at once)."""
    settings = settings or get_settings()
    if settings.storage.on_s3:
        from lakehouse.core.storage import check_bucket

        check_bucket(settings)
    return get_spark(name, settings)


def jvm_console_log() -> Path:
    """Where the JVM's own standard output goes: <state>/run/logs/spark-console.log."""
    return state_dir() / "run" / "logs" / "spark-console.log"


def _route_jvm_console(spark: SparkSession, path: Path) -> None:
    """Send what the JVM prints to its standard output to `path`: a job's output is its own
    lines, and Delta's own (a VACUUM's "Deleted 0 files and directories in a total of 1
    directories.") would land between them. Spark logs through log4j, to standard error."""
    context = spark.sparkContext
    if getattr(context, "_tributary_console", None) == path:
        return  # a session this process already started, and routed
    jvm = context._jvm
    assert jvm is not None
    path.parent.mkdir(parents=True, exist_ok=True)
    stream = jvm.java.io.PrintStream(jvm.java.io.FileOutputStream(str(path), True), True)
    jvm.java.lang.System.setOut(stream)
    context._tributary_console = path  # type: ignore[attr-defined]


def _check_master(master: str, timeout_seconds: float = 5) -> None:
    """A standalone master that does not answer, before the JVM starts: Spark itself tries
    to register three times, 20 s apart, and then fails in Java lines."""
    if not master.startswith("spark://"):
        return
    # spark://host:port, or spark://h1:p1,h2:p2 for masters with a standby: one must answer.
    why = []
    for address in master.removeprefix("spark://").split(","):
        host, _, port = address.rpartition(":")
        if not (host and port.isdigit()):
            why.append(f"{address}: not host:port")
            continue
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_seconds):
                return
        except OSError as err:
            why.append(f"{address}: {err.strerror or err}")
    raise SparkSetupError(
        f"the Spark master {master} does not answer ({'; '.join(why)}): start it, or set "
        "spark.master (TRIBUTARY__SPARK__MASTER) to local[*] to run Spark in this process"
    )


def _quiet_query_errors() -> None:
    """PySpark logs every SQL error it raises, as a JSON line with the JVM's stack trace,
    before the caller can handle it. Our jobs report the errors they catch in one line, and
    those they do not still end in a traceback with the same message."""
    import logging

    from pyspark.logger import PySparkLogger

    for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
        PySparkLogger.getLogger(name).setLevel(logging.CRITICAL)


def class_archive(jars_dir: Path) -> Path:
    """Where `make setup` keeps the driver's class archive (the JDK's class data sharing): the
    classes a Spark and Delta job loads, mapped from one file instead of read from the jars and
    verified again by every driver JVM that starts. Named by what it was made from: the JDK,
    the pyspark jars (the JVM's class path) and ours."""
    import pyspark

    java = Path(os.environ["JAVA_HOME"], "bin", "java") if "JAVA_HOME" in os.environ else None
    java = java or Path(shutil.which("java") or "java")
    pyspark_home = os.path.realpath(Path(pyspark.__file__).parent)  # one for every clone
    own_jars = sorted(jars_dir.glob("*.jar"))
    # An archive serves only a JVM whose class path begins as the one it was made with.
    class_path = driver_class_path(own_jars)
    made_from = f"{os.path.realpath(java)}|{pyspark_home}|{jars_dir.name}|{class_path}"
    return cache_dir() / "jvm" / f"spark-classes-{fingerprint(extra=made_from)}.jsa"


def driver_java_options(archive: Path, dump: bool = False) -> str:
    """The JVM options that use the class archive when it exists, or (`dump`) write it when
    the JVM exits. A JVM that cannot use an archive (another JDK build, another class path)
    runs without it; its log lines about that are off, as are the hundreds a dump writes
    about classes it leaves out."""
    quiet = "-Xlog:cds=off -Xlog:cds+dynamic=off"
    if dump:
        return f"-XX:ArchiveClassesAtExit={archive} {quiet}"
    return f"-XX:SharedArchiveFile={archive} {quiet}" if archive.exists() else ""


def _ensure_java() -> None:
    home = os.environ.get("JAVA_HOME")
    if home and Path(home, "bin", "java").exists():
        return
    for candidate in ("/usr/lib/jvm/java-17-openjdk-amd64", "/usr/lib/jvm/default-java"):
        if Path(candidate, "bin", "java").exists():
            os.environ["JAVA_HOME"] = candidate
            return
    if not any(Path(d, "java").exists() for d in os.environ.get("PATH", "").split(os.pathsep)):
        raise SparkSetupError(
            "Java 17+ is needed to run Spark and none was found: "
            "install it (apt-get install openjdk-17-jdk-headless) or set JAVA_HOME"
        )


def release_local_checkpoint(df: DataFrame) -> None:
    """Free the blocks a `df.localCheckpoint()` holds. Spark keeps them until the JVM happens
    to collect the RDD, so a long stream of large micro-batches runs out of heap first
    (a 10M-record replay did, on its second batch). `df` cannot be read afterwards."""
    plan = df._jdf.queryExecution().logical()
    if plan.getClass().getSimpleName() != "LogicalRDD":
        raise ValueError("not a DataFrame returned by localCheckpoint()")
    plan.rdd().unpersist(False)


# How Spark builds the row projections each task creates (shuffle keys, Delta's typed reads of
# its own log, ...): generated code (the default) or interpreted expressions.
PROJECTIONS = "spark.sql.codegen.factoryMode"
# Settings that change how a session's jobs run, never what they compute. A session made for
# one write (lakehouse.core.delta_io.merge_once) starts from the application's settings, so it
# carries these over from the session it serves, which may have changed them.
HOW_TO_RUN: tuple[str, ...] = (PROJECTIONS, DELTA_LOG_TASKS)


@contextmanager
def interpreted_projections(spark: SparkSession, enabled: bool) -> Iterator[None]:
    """Within this block, let the session's jobs interpret their row projections instead of
    generating code for them (whole-stage code generation is untouched).

    Every task writes out the projection's Java source again before it finds the compiled
    class in the cache; for Delta's log, a schema of hundreds of fields, that is most of a
    small job's time. On large batches interpreting is slower, hence the switch
    (docs/performance.md)."""
    if not enabled:
        yield
        return
    before = spark.conf.get(PROJECTIONS, None)
    spark.conf.set(PROJECTIONS, "NO_CODEGEN")
    try:
        yield
    finally:
        if before is None:
            spark.conf.unset(PROJECTIONS)
        else:
            spark.conf.set(PROJECTIONS, before)
