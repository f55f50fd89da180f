"""Install everything Tributary needs, from the project's own files. Idempotent.

    python3 infra/bootstrap.py [all|venv|jars|classes|kafka|connect|postgres|minio|compose|secrets|
                                browser|web]

Runs with the machine's Python 3.11 and the standard library only (the venv does not exist
yet). Downloads and builds go to the cache folder ($TRIBUTARY_CACHE, default
~/.cache/tributary), keyed by a hash of the file that defines them, so a second clone on the
same machine reuses them and a changed pin rebuilds them. Each step prints what it does.
"""

from __future__ import annotations

import csv
import fcntl
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lakehouse.core.paths import (
    CONNECT_POM,
    KAFKA_POM,
    REPO_ROOT,
    SPARK_POM,
    cache_dir,
    connect_jars_dir,
    fingerprint,
    kafka_jars_dir,
    spark_jars_dir,
)
from lakehouse.core.secrets import ensure_secrets

INFRA = REPO_ROOT / "infra"
LOCKFILE = INFRA / "python" / "requirements.lock"
COMMAND_SOURCE = INFRA / "python" / "tributary_command.py"  # becomes the venv's `tributary`
UV_VERSION = "0.9.30"
# How the venv is built, beside the lock file: a change here builds a new one. Its packages
# are compiled to bytecode when installed (uv does not by default): every job, Airflow task
# and test worker would otherwise compile Great Expectations, Airflow and pandas again as it
# imports them, seconds each time.
VENV_BUILD = f"uv {UV_VERSION}, bytecode"
# The Go module proxy refuses the RELEASE.2025-10-15T17-29-55Z tag and its pseudo-version
# (403 "This module version is not available"); this is the one minio/minio version it serves.
MINIO_MODULE = "github.com/minio/minio"
MINIO_VERSION = "v0.0.0-20260212201848-7aac2a2c5b7c"
MIN_JAVA = 17
# `docker compose config` validates docker-compose.yml in the tests; the machine has the docker
# CLI but not its compose plugin, so we build the plugin (it cannot be `go install`ed: its
# go.mod has exclude directives).
COMPOSE_MODULE = "github.com/docker/compose/v2"
COMPOSE_VERSION = "v2.40.3"
# The browser tests drive Debian's Chromium through its ChromeDriver (a test tool's own browser
# download cannot work on a closed network). Recommends are left out: they would pull udev and
# upgrade systemd; fonts-liberation gives pages the usual font metrics.
CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
BROWSER_PACKAGES = ["chromium", "chromium-driver", "fonts-liberation"]
# The database change data capture reads: Debian's PostgreSQL 15 server, run by
# infra/services/postgres.py as a private cluster (Debian's own cluster is left alone).
POSTGRES_BIN = Path("/usr/lib/postgresql/15/bin")
POSTGRES_PACKAGES = ["postgresql-15"]


class SetupError(Exception):
    """A step cannot finish; the message says what to do."""


def step(message: str) -> None:
    print(f"==> {message}", flush=True)


def info(message: str) -> None:
    print(f"    {message}", flush=True)


@contextmanager
def cache_lock(name: str) -> Iterator[None]:
    """Two clones bootstrapping at once must not build into the same folder together."""
    locks = cache_dir() / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    with open(locks / f"{name}.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def run(
    cmd: list[str],
    *,
    what: str,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    quiet: bool = False,
) -> None:
    """Run a command, streaming its output (or a heartbeat when quiet); fail with a clear cause."""
    started = time.monotonic()
    stop = threading.Event()

    def heartbeat() -> None:
        while not stop.wait(20):
            info(f"... still {what} ({time.monotonic() - started:.0f}s)")

    beat = threading.Thread(target=heartbeat, daemon=True)
    beat.start()
    try:
        proc = subprocess.run(
            cmd,
            env=env,
            cwd=cwd,
            text=True,
            stdout=subprocess.PIPE if quiet else None,
            stderr=subprocess.STDOUT if quiet else None,
        )
    except FileNotFoundError:
        raise SetupError(f"{cmd[0]} is not installed; it is needed for {what}") from None
    finally:
        stop.set()
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout or "").splitlines()[-25:])
        raise SetupError(f"{what} failed (exit {proc.returncode}): {' '.join(cmd[:4])} ...\n{tail}")
    info(f"{what}: done in {time.monotonic() - started:.0f}s")


def complete(folder: Path) -> bool:
    return (folder / ".complete").exists()


def build_into(folder: Path, build: Callable[[Path], None]) -> Path:
    """Build into a temporary sibling, then rename: a killed build never looks complete."""
    if complete(folder):
        return folder
    tmp = folder.with_name(folder.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    build(tmp)
    (tmp / ".complete").write_text(time.strftime("%Y-%m-%dT%H:%M:%SZ\n", time.gmtime()))
    shutil.rmtree(folder, ignore_errors=True)
    tmp.rename(folder)
    return folder


# --- tools -----------------------------------------------------------------------------------


def java_home() -> Path:
    """A JDK of version >= 17: JAVA_HOME if set, else the one `java` on PATH belongs to."""
    candidates = []
    if os.environ.get("JAVA_HOME"):
        candidates.append(Path(os.environ["JAVA_HOME"]))
    java = shutil.which("java")
    if java:
        candidates.append(Path(os.path.realpath(java)).parent.parent)
    for home in candidates:
        version = _java_major(home / "bin" / "java")
        if version and version >= MIN_JAVA:
            return home
    raise SetupError(
        f"Java {MIN_JAVA} or newer is needed (Spark 4 and Kafka 4 run on it) and none was found; "
        "install it (apt-get install openjdk-17-jdk-headless) or set JAVA_HOME"
    )


def _java_major(java: Path) -> int | None:
    if not java.exists():
        return None
    out = subprocess.run([str(java), "-version"], capture_output=True, text=True).stderr
    match = re.search(r'version "(\d+)', out)
    return int(match.group(1)) if match else None


def require_tool(name: str, why: str, install: str) -> str:
    path = shutil.which(name)
    if not path:
        raise SetupError(f"{name} is not installed; it is needed to {why}. Install it: {install}")
    return path


# --- steps -----------------------------------------------------------------------------------


def venv_dir() -> Path:
    return cache_dir() / "venv" / f"py311-{fingerprint(LOCKFILE, extra=VENV_BUILD)}"


def setup_venv() -> Path:
    folder = venv_dir()
    step(f"Python environment ({folder})")
    if sys.version_info[:2] != (3, 11):
        raise SetupError(
            f"Python 3.11 is needed, this is {sys.version.split()[0]}; "
            "run the bootstrap with python3.11"
        )
    with cache_lock("venv"):
        if not complete(folder):
            build_venv(folder, uv_cache=True)
        elif missing := missing_venv_files(folder):
            info(
                f"{len(missing)} files of the cached venv are gone (first: {missing[0]}); "
                "rebuilding it, without uv's cache in case the loss came from there"
            )
            build_venv(folder, uv_cache=False)
        else:
            info("cached")
    install_command(folder)
    link = REPO_ROOT / ".venv"
    if link.is_symlink() or not link.exists():
        if link.is_symlink():
            link.unlink()
        link.symlink_to(folder)
    return folder


def build_venv(folder: Path, uv_cache: bool) -> None:
    # A venv must live at its final path (scripts hard-code it), so no .partial here.
    shutil.rmtree(folder, ignore_errors=True)
    run([sys.executable, "-m", "venv", str(folder)], what="creating the venv")
    python = str(folder / "bin" / "python")
    run(
        [
            python,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            f"uv=={UV_VERSION}",
        ],
        what="installing uv",
    )
    run(
        [str(folder / "bin" / "uv"), "pip", "install", "--python", python, "--require-hashes"]
        + ["--compile-bytecode"]
        + ([] if uv_cache else ["--no-cache"])
        + ["-r", str(LOCKFILE)],
        what="installing the pinned Python packages",
        env={**os.environ, "UV_CACHE_DIR": str(cache_dir() / "uv")},
    )
    if missing := missing_venv_files(folder):
        raise SetupError(
            f"the new venv lacks {len(missing)} files its packages list (first: {missing[0]}); "
            f"check the disk, then delete {folder} and run `make setup` again"
        )
    (folder / ".complete").write_text("ok\n")


def missing_venv_files(folder: Path) -> list[str]:
    """Files the installed packages' RECORDs list that are not on disk. A cache copied or
    cleaned in part leaves a venv that looks complete and fails on its first import.
    Bytecode is left out: it is rebuilt on import."""
    missing = []
    for site in folder.glob("lib/python3.11/site-packages"):
        for record in sorted(site.glob("*.dist-info/RECORD")):
            with record.open(newline="") as rows:
                for row in csv.reader(rows):
                    if row and not row[0].endswith(".pyc") and not (site / row[0]).exists():
                        missing.append(row[0])
    return missing


def install_command(venv: Path) -> None:
    """The `tributary` command in the venv's bin/, run by the venv's Python. Written on every
    setup (cached venvs included), so a change to it reaches every clone."""
    target = venv / "bin" / "tributary"
    body = COMMAND_SOURCE.read_text().split("\n", 1)[1]
    partial = target.with_name("tributary.partial")
    partial.write_text(f"#!{venv / 'bin' / 'python'}\n{body}")
    partial.chmod(0o755)
    partial.replace(target)


def pyspark_jars() -> Path:
    found = list((venv_dir() / "lib").glob("python3.11/site-packages/pyspark/jars"))
    if not found:
        raise SetupError("pyspark is not in the venv; run `make setup` first")
    return found[0]


def _artifact(jar_name: str) -> str:
    """'parquet-hadoop-1.16.0.jar' -> 'parquet-hadoop'."""
    return re.sub(r"-\d[\w.\-]*\.jar$", "", jar_name)


def maven_copy(pom: Path, into: Path) -> None:
    mvn = require_tool("mvn", "resolve the JVM jars from Maven Central", "apt-get install maven")
    run(
        [
            mvn,
            "-B",
            "--no-transfer-progress",
            "-f",
            str(pom),
            f"-Dmaven.repo.local={cache_dir() / 'm2'}",
            "dependency:copy-dependencies",
            f"-DoutputDirectory={into}",
        ],
        what=f"resolving jars for {pom.parent.name} with Maven",
        quiet=True,
        env={**os.environ, "JAVA_HOME": str(java_home())},
    )


def setup_spark_jars() -> Path:
    folder = spark_jars_dir()
    step(f"Spark jars: Delta, Kafka connector, S3A ({folder})")
    with cache_lock("spark-jars"):
        if complete(folder):
            info("cached")
            return folder

        def build(tmp: Path) -> None:
            maven_copy(SPARK_POM, tmp)
            # Spark's own copy of a library wins: two versions of one class break at run time.
            shipped = {_artifact(j.name) for j in pyspark_jars().glob("*.jar")}
            dropped = [j for j in tmp.glob("*.jar") if _artifact(j.name) in shipped]
            for jar in dropped:
                jar.unlink()
            info(f"{len(list(tmp.glob('*.jar')))} jars kept, {len(dropped)} already in pyspark")

        return build_into(folder, build)


def setup_class_archive() -> None:
    """The Spark driver's class archive (infra/spark/class_archive.py), made with the venv and
    the jars. Without it every job still runs, only starts more slowly: a failure is said, not
    fatal, and the next setup tries again."""
    python = str(venv_dir() / "bin" / "python")
    module = [python, "-m", "infra.spark.class_archive"]
    where = subprocess.run([*module, "--where"], cwd=REPO_ROOT, capture_output=True, text=True)
    step(f"Spark driver class archive ({where.stdout.strip() or '?'})")
    if where.returncode == 0 and Path(where.stdout.strip()).exists():
        info("cached")
        return
    with cache_lock("class-archive"):
        try:
            run(
                module,
                what="starting a Spark driver to archive its classes",
                cwd=REPO_ROOT,
                quiet=True,
            )
        except SetupError as err:
            info(f"skipped, Spark jobs will start more slowly: {err}")


def setup_kafka_jars() -> Path:
    folder = kafka_jars_dir()
    step(f"Kafka broker jars ({folder})")
    with cache_lock("kafka-jars"):
        if complete(folder):
            info("cached")
            return folder
        return build_into(folder, lambda tmp: maven_copy(KAFKA_POM, tmp))


def setup_connect_jars() -> Path:
    folder = connect_jars_dir()
    step(f"Kafka Connect and Debezium jars ({folder})")
    with cache_lock("connect-jars"):
        if complete(folder):
            info("cached")
            return folder
        return build_into(folder, lambda tmp: maven_copy(CONNECT_POM, tmp))


def minio_binary() -> Path:
    return cache_dir() / "bin" / f"minio-{MINIO_VERSION}"


def setup_minio() -> Path:
    target = minio_binary()
    step(f"MinIO server ({target})")
    with cache_lock("minio"):
        if target.exists():
            info("cached")
            return target
        go = require_tool(
            "go",
            "build the MinIO server from source",
            "install Go 1.24 or newer (https://go.dev/doc/install or apt-get)",
        )
        gobin = target.parent / "minio.partial"
        shutil.rmtree(gobin, ignore_errors=True)
        env = {
            **os.environ,
            "GOBIN": str(gobin),
            "GOMODCACHE": str(cache_dir() / "go" / "mod"),
            "GOCACHE": str(cache_dir() / "go" / "build"),
            "GOFLAGS": "-buildvcs=false",
            "CGO_ENABLED": "0",
        }
        info("first build downloads ~300 Go modules and compiles for a few minutes")
        run([go, "install", f"{MINIO_MODULE}@{MINIO_VERSION}"], what="building MinIO", env=env)
        (gobin / "minio").rename(target)
        shutil.rmtree(gobin, ignore_errors=True)
        return target


def compose_plugin_dir() -> Path:
    """A DOCKER_CONFIG folder whose cli-plugins/ holds our docker-compose build."""
    return cache_dir() / "docker" / f"compose-{COMPOSE_VERSION}"


def setup_compose() -> Path:
    folder = compose_plugin_dir()
    step(f"docker compose plugin, to validate docker-compose.yml ({folder})")
    with cache_lock("compose"):
        if complete(folder):
            info("cached")
            return folder
        go = require_tool(
            "go",
            "build the docker compose plugin",
            "install Go 1.24 or newer (https://go.dev/doc/install or apt-get)",
        )
        env = {
            **os.environ,
            "GOMODCACHE": str(cache_dir() / "go" / "mod"),
            "GOCACHE": str(cache_dir() / "go" / "build"),
            "GOFLAGS": "-buildvcs=false",
            "CGO_ENABLED": "0",
        }

        def build(tmp: Path) -> None:
            found = subprocess.run(
                [go, "mod", "download", "-json", f"{COMPOSE_MODULE}@{COMPOSE_VERSION}"],
                env=env,
                capture_output=True,
                text=True,
            )
            match = re.search(r'"Dir": "([^"]+)"', found.stdout)
            if found.returncode != 0 or not match:
                raise SetupError(
                    f"downloading {COMPOSE_MODULE}@{COMPOSE_VERSION} failed: "
                    + (found.stderr or found.stdout).strip()[-300:]
                )
            source = tmp / "src"
            shutil.copytree(match.group(1), source)
            source.chmod(0o755)
            for path in source.rglob("*"):
                path.chmod(0o755 if path.is_dir() else 0o644)
            plugins = tmp / "cli-plugins"
            plugins.mkdir()
            run(
                [
                    go,
                    "build",
                    "-trimpath",
                    "-ldflags",
                    f"-s -w -X github.com/docker/compose/v2/internal.Version={COMPOSE_VERSION}",
                    "-o",
                    str(plugins / "docker-compose"),
                    "./cmd",
                ],
                what="building docker compose",
                env=env,
                cwd=source,
            )
            shutil.rmtree(source)

        return build_into(folder, build)


def drop_go_caches() -> None:
    """Go's module and build caches (~3 GB) are only needed while building; the binaries are
    kept, so a rebuild happens only when a pinned version changes."""
    go_dir = cache_dir() / "go"
    if not go_dir.exists() or not (minio_binary().exists() and complete(compose_plugin_dir())):
        return
    go = shutil.which("go")
    if go:  # module files are read-only; `go clean` knows how to remove them
        subprocess.run(
            [go, "clean", "-modcache"],
            env={**os.environ, "GOMODCACHE": str(go_dir / "mod")},
            capture_output=True,
        )
    shutil.rmtree(go_dir, ignore_errors=True)
    info("removed Go's build caches (the built binaries are kept)")


def setup_secrets() -> None:
    path, generated = ensure_secrets()
    step(f"Secrets ({path})")
    if not generated:
        info("already generated")
        return
    info(f"generated {', '.join(generated)} (mode 0600, outside the clone)")
    if "AIRFLOW_ADMIN_PASSWORD" in generated:
        # Printed this once; afterwards it is only in the file.
        password = dict(
            line.split("=", 1)
            for line in path.read_text().splitlines()
            if "=" in line and not line.startswith("#")
        )["AIRFLOW_ADMIN_PASSWORD"]
        info(f"Airflow login: admin / {password}   (kept in {path})")


def _apt_get(cmd: list[str], what: str) -> tuple[int, str]:
    """Run apt-get, its output shown as it comes (apt prints each package it fetches and sets
    up); the exit code and the output's tail."""
    started = time.monotonic()
    tail: deque[str] = deque(maxlen=40)
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        info(line.rstrip())
        tail.append(line)
    code = proc.wait()
    if code == 0:
        info(f"{what}: done in {time.monotonic() - started:.0f}s")
    return code, "".join(tail)


# apt-get's words for package lists that are missing or older than the mirror.
STALE_LISTS = re.compile(
    r"Unable to locate package|has no installation candidate|404\s+Not Found|Failed to fetch"
)


def setup_browser() -> None:
    step(f"Headless Chromium and ChromeDriver for the browser tests ({CHROMIUM}, {CHROMEDRIVER})")
    if CHROMIUM.exists() and CHROMEDRIVER.exists():
        info("installed")
        return
    info("first install downloads about 135 MB of Debian packages (440 MB installed)")
    apt_install(
        BROWSER_PACKAGES,
        "Chromium",
        lambda: CHROMIUM.exists() and CHROMEDRIVER.exists(),
        f"install Chromium and ChromeDriver so that {CHROMIUM} and {CHROMEDRIVER} exist",
    )


def setup_postgres() -> None:
    step(f"PostgreSQL 15 server, the database change data capture reads ({POSTGRES_BIN})")
    if (POSTGRES_BIN / "postgres").exists() and (POSTGRES_BIN / "initdb").exists():
        info("installed")
        return
    info("first install downloads about 20 MB of Debian packages (60 MB installed)")
    apt_install(
        POSTGRES_PACKAGES,
        "PostgreSQL",
        lambda: (POSTGRES_BIN / "postgres").exists(),
        f"install PostgreSQL 15 so that {POSTGRES_BIN}/postgres exists",
    )


def apt_install(
    wanted: list[str], what: str, installed: Callable[[], bool], otherwise: str
) -> None:
    """Install Debian packages with apt-get (as root, or through sudo without a password),
    updating the package lists once if they are stale. Raises SetupError with the command to
    run by hand."""
    packages = " ".join(wanted)
    by_hand = f"sudo apt-get update && sudo apt-get install -y --no-install-recommends {packages}"
    apt = shutil.which("apt-get")
    if not apt:
        raise SetupError(f"apt-get is not available to install {packages}; {otherwise}")
    if os.geteuid() == 0:
        sudo: list[str] = []
    elif shutil.which("sudo"):
        sudo = ["sudo", "-n"]
    else:
        raise SetupError(f"installing {packages} needs root; run by hand: {by_hand}")
    install = [
        *sudo,
        apt,
        "install",
        "-y",
        "--no-install-recommends",
        "-o",
        "DPkg::Lock::Timeout=300",
        *wanted,
    ]
    code, output = _apt_get(install, f"installing {what} with apt-get")
    if code != 0 and STALE_LISTS.search(output):
        info("the package lists are missing or out of date: apt-get update, then again")
        code, output = _apt_get([*sudo, apt, "update"], "apt-get update")
        if code == 0:
            code, output = _apt_get(install, f"installing {what} with apt-get")
    if code != 0 or not installed():
        reason = "sudo needs a password" if "sudo:" in output else f"apt-get exit {code}"
        raise SetupError(f"installing {packages} failed ({reason}); run by hand: {by_hand}")


def setup_web() -> Path:
    """The Data Docs' CSS, JS and fonts, from the npm registry (infra/web_assets.py)."""
    # web_assets imports infra.bootstrap; run as a script this file is __main__, and a second
    # copy of it would raise a SetupError that main() does not catch.
    sys.modules.setdefault("infra.bootstrap", sys.modules[__name__])
    from infra.web_assets import install

    return install()


STEPS: dict[str, Callable[[], object]] = {
    "venv": setup_venv,
    "jars": setup_spark_jars,
    "classes": setup_class_archive,
    "kafka": setup_kafka_jars,
    "connect": setup_connect_jars,
    "postgres": setup_postgres,
    "minio": setup_minio,
    "compose": setup_compose,
    "secrets": setup_secrets,
    "browser": setup_browser,
    "web": setup_web,
}


def main(argv: list[str]) -> int:
    wanted = argv or ["all"]
    unknown = [w for w in wanted if w != "all" and w not in STEPS]
    if unknown:
        print(
            f"bootstrap: unknown step {unknown[0]!r}; choose from all, {', '.join(STEPS)}",
            file=sys.stderr,
        )
        return 2
    names = list(STEPS) if "all" in wanted else wanted
    started = time.monotonic()
    try:
        java_home()
        for name in names:
            STEPS[name]()
        drop_go_caches()
    except SetupError as err:
        print(f"setup failed: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("setup interrupted; run it again to continue where it stopped", file=sys.stderr)
        return 130
    step(f"setup complete in {time.monotonic() - started:.0f}s (cache: {cache_dir()})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
