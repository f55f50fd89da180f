"""Typed configuration, loaded once.

Layers, each overriding the one before:
  1. config/base.yaml
  2. config/<profile>.yaml          (profile from TRIBUTARY_PROFILE, default "local")
  3. TRIBUTARY__<SECTION>__<KEY>    environment variables (values parsed as YAML scalars)
  4. secrets from the environment or the generated secrets file (lakehouse.core.secrets)

Everything is parsed into frozen pydantic models; a bad file, profile or value raises
ConfigError with one readable line per problem instead of a traceback.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)

from lakehouse.core import secrets
from lakehouse.core.paths import CONFIG_DIR, STATE_ENV, state_dir

ENV_PREFIX = "TRIBUTARY__"
PROFILE_ENV = "TRIBUTARY_PROFILE"
DEFAULT_PROFILE = "local"


class ConfigError(Exception):
    """The configuration cannot be used; the message says what to fix."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class KafkaSettings(_Frozen):
    bootstrap_servers: str = Field(min_length=1)
    topic: str = Field(pattern=r"^[A-Za-z0-9._-]{1,249}$")
    # The commerce topics (docs/joins.md): payments, and the order lifecycle events
    # that are the source of truth for orders' state. Both keyed by order_id.
    payments_topic: str = Field(pattern=r"^[A-Za-z0-9._-]{1,249}$")
    order_events_topic: str = Field(pattern=r"^[A-Za-z0-9._-]{1,249}$")
    partitions: int = Field(ge=1, le=1000)
    retention_ms: int = Field(ge=-1)
    min_read_tasks: int = Field(ge=1, le=10000)
    connect_timeout_seconds: float = Field(gt=0)

    @field_validator("topic", "payments_topic", "order_events_topic")
    @classmethod
    def _not_dots(cls, value: str) -> str:
        if value in (".", ".."):  # Kafka's own rule, beside the pattern: they name folders
            raise ValueError(f"{value!r} is not a valid Kafka topic name")
        return value


class StorageSettings(_Frozen):
    root: str = Field(min_length=1)
    checkpoints: str = Field(min_length=1)

    @field_validator("root", "checkpoints")
    @classmethod
    def _local_or_s3a(cls, value: str) -> str:
        if "://" in value and not value.startswith(("s3a://", "file://")):
            raise ValueError(f"must be a local path or an s3a:// URI, got {value!r}")
        return value.rstrip("/")

    @property
    def on_s3(self) -> bool:
        return self.root.startswith("s3a://") or self.checkpoints.startswith("s3a://")


class S3Settings(_Frozen):
    endpoint: str = Field(pattern=r"^https?://")
    region: str
    bucket: str = Field(pattern=r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
    path_style_access: bool
    access_key: SecretStr | None = None
    secret_key: SecretStr | None = None


class SpeedSettings(_Frozen):
    max_record_bytes: int = Field(ge=256)
    future_tolerance_seconds: int = Field(ge=0)
    allowed_lateness_seconds: int = Field(ge=0)
    watermark_support_events: int = Field(ge=1)
    idle_partition_seconds: int = Field(ge=0)
    trigger_interval_seconds: int = Field(ge=0)
    max_offsets_per_trigger: int = Field(ge=1)
    small_batch_records: int = Field(ge=0)
    delta_rs_append_rows: int = Field(ge=0)
    delta_rs_append_mb: int = Field(ge=0)
    correction_read_rows: int = Field(ge=0)
    write_threads: int = Field(ge=1)
    compact_every_batches: int = Field(ge=1)
    compact_files_below_mb: int = Field(ge=1)
    vacuum_every_batches: int = Field(ge=1)
    vacuum_after_hours: int = Field(ge=0)
    stale_after_seconds: int = Field(ge=10)
    freshness_slo_seconds: int = Field(ge=1)


MIN_DRIVER_MEMORY_MB = 512


def jvm_size_bytes(size: str) -> int:
    """`512m` -> bytes (JVM sizes: k, m, g)."""
    return int(size[:-1]) * 2 ** (10 * "kmg".index(size[-1].lower()) + 10)


class SparkSettings(_Frozen):
    master: str = Field(pattern=r"^(local(\[(\*|\d+)\])?|spark://.+|yarn|k8s://.+)$")
    driver_memory: str = Field(pattern=r"^\d+[kmgKMG]$")
    shuffle_partitions: int = Field(ge=1)
    delta_log_tasks: int = Field(ge=1)
    java_options: str = ""  # for the driver's JVM, after ours
    conf: dict[str, str] = Field(default_factory=dict)

    @field_validator("driver_memory")
    @classmethod
    def _enough_memory(cls, value: str) -> str:
        # Below this the JVM does not start at all (Spark asks for 450m of reserved memory
        # and more), and says so only in a 300-line stack trace.
        if jvm_size_bytes(value) < MIN_DRIVER_MEMORY_MB * 2**20:
            raise ValueError(f"must be at least {MIN_DRIVER_MEMORY_MB}m")
        return value

    @field_validator("conf", mode="before")
    @classmethod
    def _stringify(cls, value: Any) -> Any:
        if isinstance(value, Mapping):
            return {str(k): str(v) for k, v in value.items()}
        return value


class AirflowSettings(_Frozen):
    url: str = Field(pattern=r"^https?://")
    admin_user: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    admin_password: SecretStr | None = None


# A Kafka topic or group name (topics allow these characters only).
_KAFKA_NAME = r"^[A-Za-z0-9._-]{1,200}$"


class ServicesSettings(_Frozen):
    bind_host: str
    kafka_port: int = Field(ge=1, le=65535)
    kafka_controller_port: int = Field(ge=1, le=65535)
    kafka_heap: str = Field(pattern=r"^\d+[kmgKMG]$")
    minio_port: int = Field(ge=1, le=65535)
    minio_console_port: int = Field(ge=1, le=65535)
    airflow_port: int = Field(ge=1, le=65535)
    airflow_execution_port: int = Field(ge=1, le=65535)
    airflow_parallelism: int = Field(ge=1, le=64)
    airflow_reparse_seconds: int = Field(ge=5)
    postgres_port: int = Field(ge=1, le=65535)
    connect_port: int = Field(ge=1, le=65535)
    connect_heap: str = Field(pattern=r"^\d+[kmgKMG]$")
    # Kafka Connect's group and the prefix of its internal topics (<prefix>-configs, -offsets,
    # -status), which keep the connectors' configs and source offsets: workers on one Kafka
    # with another group and prefix are a Connect cluster of their own.
    connect_group_id: str = Field(pattern=_KAFKA_NAME)
    connect_storage_topic_prefix: str = Field(pattern=_KAFKA_NAME)


class BatchSettings(_Frozen):
    # Reruns and backfills replace an interval's files; the batch job deletes the files no
    # version newer than vacuum_after_hours ago reads, from each of its tables at most once
    # every vacuum_every_hours (the last vacuum is read from the table's log).
    vacuum_after_hours: int = Field(ge=0)
    vacuum_every_hours: int = Field(ge=1)


class ReplaySettings(_Frozen):
    # Records per micro-batch of a replay. Large on purpose: a replay of events that are all
    # in the log already need not set any aside as late, and one big batch sees them all.
    max_offsets_per_trigger: int = Field(ge=1)
    # Seconds between progress lines in the log while a replay runs.
    progress_every_seconds: float = Field(gt=0)


class MaintenanceSettings(_Frozen):
    # The bookkeeping tables (ops.*, dq.*) and finished replay versions get a commit or a few
    # per run, each a small file that every later read opens: the maintenance job compacts a
    # table once it has compact_at_files files below compact_files_below_mb, and deletes the
    # files no version newer than vacuum_after_hours ago reads.
    compact_files_below_mb: int = Field(default=32, ge=1)
    compact_at_files: int = Field(default=8, ge=2)
    vacuum_after_hours: int = Field(default=168, ge=0)
    # How long to wait for a table's writer (a batch run, a replay) before leaving its tables
    # for the next run.
    lock_wait_seconds: float = Field(default=60, ge=0)


class SupervisorSettings(_Frozen):
    # How the speed layer's supervisor (lakehouse.speed.supervisor) waits on the stream.
    # A start is judged after startup_check_seconds: Spark fails fast on bad config or an
    # unreachable broker, so alive by then means it ran.
    startup_check_seconds: float = Field(default=8, gt=0)
    # A graceful stop lets the current micro-batch finish; killed after this long.
    stop_timeout_seconds: float = Field(default=120, gt=0)
    # How long a new stream gets to commit its first micro-batch before the check gives up.
    first_batch_timeout_seconds: float = Field(default=240, gt=0)
    # Records that arrive at an idle stream look stale until its next trigger: a stale
    # verdict is looked at again after this long before the stream is restarted.
    stale_confirm_seconds: float = Field(default=20, ge=0)
    # How often the health check looks again while it waits for the first micro-batch.
    poll_seconds: float = Field(default=5, gt=0)


class DqSettings(_Frozen):
    # Allowed unexplained absolute difference per measure (a view column, e.g. events,
    # amount_sum, revenue); a measure not listed must match exactly.
    thresholds: dict[str, float] = Field(default_factory=dict)
    # The gate fails when more windows than this have a difference beyond its threshold.
    max_unexplained_windows: int = Field(default=0, ge=0)

    @field_validator("thresholds")
    @classmethod
    def _not_negative(cls, value: dict[str, float]) -> dict[str, float]:
        negative = sorted(k for k, v in value.items() if v < 0)
        if negative:
            raise ValueError(f"thresholds must be >= 0: {', '.join(negative)}")
        return value


class JoinsSettings(_Frozen):
    # The windowed stream-stream joins (lakehouse.joins.windowed), all on event time: the
    # clicks before a purchase that it is attributed to, the time after an order is placed in
    # which its payment counts, and how far each side's watermark stays behind its newest
    # event time (a row older than the watermark when read is dropped by Spark, and the judge
    # explains it as late).
    attribution_window_seconds: int = Field(default=1800, ge=1)
    payment_window_seconds: int = Field(default=3600, ge=1)
    watermark_delay_seconds: int = Field(default=600, ge=0)


class ClusterSettings(_Frozen):
    """The loopback cluster `make cluster-up` starts (infra/services/*_cluster.py), beside the
    embedded services and on ports of its own. Only those services read this section: jobs
    reach any cluster through kafka.bootstrap_servers, s3.endpoint and spark.master (the
    cluster profile points them here)."""

    spark_master_port: int = Field(default=7077, ge=1, le=65535)
    # 8090: Airflow has 8080, Spark's default for the master's web UI.
    spark_master_web_port: int = Field(default=8090, ge=1, le=65535)
    # One worker per entry; each worker offers spark_worker_cores and spark_worker_memory.
    spark_worker_ports: tuple[int, ...] = Field(default=(7078, 7079), min_length=1)
    spark_worker_web_ports: tuple[int, ...] = Field(default=(8091, 8092), min_length=1)
    # Cores are the master's scheduling slots, not CPUs. Each application takes at most
    # spark.cores.max of them (config/cluster.yaml) and a stream holds its slots for its life,
    # so the workers must offer enough for every stream the DAGs keep running and the batch
    # runs beside them, or a batch run waits for an executor forever. The memory is one
    # executor's (spark.executor.memory) per slot.
    spark_worker_cores: int = Field(default=6, ge=1)
    spark_worker_memory: str = Field(default="6g", pattern=r"^\d+[kmgKMG]$")
    # One broker (and KRaft controller, a quorum of all of them) per entry.
    kafka_ports: tuple[int, ...] = Field(default=(9192, 9193, 9194), min_length=1)
    kafka_controller_ports: tuple[int, ...] = Field(default=(9195, 9196, 9197), min_length=1)
    kafka_heap: str = Field(default="384m", pattern=r"^\d+[kmgKMG]$")
    minio_port: int = Field(default=9010, ge=1, le=65535)
    minio_console_port: int = Field(default=9011, ge=1, le=65535)
    # Erasure coding needs at least 4 drives (MinIO's parity is half of them at 4).
    minio_drives: int = Field(default=4, ge=4, le=16)

    @model_validator(mode="after")
    def _one_port_each(self) -> ClusterSettings:
        if len(self.spark_worker_ports) != len(self.spark_worker_web_ports):
            raise ValueError(
                "spark_worker_ports and spark_worker_web_ports: one of each per worker"
            )
        if len(self.kafka_ports) != len(self.kafka_controller_ports):
            raise ValueError("kafka_ports and kafka_controller_ports: one of each per broker")
        return self


# PostgreSQL and Kafka Connect object names: lower-case identifiers, never quoted.
_IDENTIFIER = r"^[a-z_][a-z0-9_]{0,62}$"


class CdcSettings(_Frozen):
    """Change data capture: the database Debezium reads and the connector that reads it."""

    # Where clients reach Kafka Connect's REST API and PostgreSQL (the embedded services'
    # ports are under `services`; these are what clients use, as kafka.bootstrap_servers).
    connect_url: str = Field(pattern=r"^https?://")
    database_host: str = Field(min_length=1)
    database_port: int = Field(ge=1, le=65535)
    database: str = Field(pattern=_IDENTIFIER)
    user: str = Field(pattern=_IDENTIFIER)
    password: SecretStr | None = None
    schema_name: str = Field(pattern=_IDENTIFIER)
    tables: tuple[str, ...] = Field(min_length=1)
    topic_prefix: str = Field(pattern=r"^[A-Za-z0-9_-]{1,100}$")
    connector_name: str = Field(pattern=r"^[A-Za-z0-9._-]{1,100}$")
    slot_name: str = Field(pattern=_IDENTIFIER)
    publication_name: str = Field(pattern=_IDENTIFIER)

    @field_validator("tables")
    @classmethod
    def _table_names(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        bad = [name for name in value if not re.match(_IDENTIFIER, name)]
        if bad:
            raise ValueError(f"table names must be lower-case identifiers: {', '.join(bad)}")
        if len(set(value)) != len(value):
            raise ValueError("a table is listed twice")
        return value

    def topic(self, table: str) -> str:
        """The changelog topic Debezium writes a table's changes to: <prefix>.<schema>.<table>."""
        return f"{self.topic_prefix}.{self.schema_name}.{table}"


# Settings that are not in a section (TRIBUTARY__MODE=kappa).
TOP_LEVEL_KEYS = {"mode"}


class Settings(_Frozen):
    profile: str
    # lambda: the batch layer recomputes on schedule; kappa: no batch layer, corrections
    # come from replays of the log (jobs/replay.py).
    mode: Literal["lambda", "kappa"]
    kafka: KafkaSettings
    storage: StorageSettings
    s3: S3Settings
    speed: SpeedSettings
    batch: BatchSettings
    replay: ReplaySettings
    spark: SparkSettings
    airflow: AirflowSettings
    services: ServicesSettings
    cdc: CdcSettings
    dq: DqSettings = Field(default_factory=DqSettings)
    maintenance: MaintenanceSettings = Field(default_factory=MaintenanceSettings)
    supervisor: SupervisorSettings = Field(default_factory=SupervisorSettings)
    joins: JoinsSettings = Field(default_factory=JoinsSettings)
    cluster: ClusterSettings = Field(default_factory=ClusterSettings)


def available_profiles(config_dir: Path = CONFIG_DIR) -> list[str]:
    return sorted(p.stem for p in config_dir.glob("*.yaml") if p.stem != "base")


def load_settings(
    profile: str | None = None,
    environ: Mapping[str, str] | None = None,
    config_dir: Path = CONFIG_DIR,
) -> Settings:
    """Build Settings from the files, the environment and the secrets. Pure: no caching."""
    env = os.environ if environ is None else environ
    _check_state_folder(env)
    profile = profile or env.get(PROFILE_ENV) or DEFAULT_PROFILE
    if profile not in available_profiles(config_dir):
        raise ConfigError(
            f"unknown profile {profile!r} (from {PROFILE_ENV}); "
            f"choose one of: {', '.join(available_profiles(config_dir))}"
        )
    merged = _read_yaml(config_dir / "base.yaml")
    merged = _deep_merge(merged, _read_yaml(config_dir / f"{profile}.yaml"))
    merged = _deep_merge(merged, _env_overrides(env))
    merged = _deep_merge(merged, _secret_values(env))
    merged["profile"] = profile
    merged = _expand_placeholders(merged, {"state": str(state_dir(env))})
    try:
        return Settings.model_validate(merged)
    except ValidationError as err:
        raise ConfigError(_describe(err, profile)) from None


@functools.cache
def get_settings() -> Settings:
    """The process-wide settings, read once from files and environment."""
    return load_settings()


def _check_state_folder(env: Mapping[str, str]) -> None:
    """The state folder (locks, logs, secrets, the local lakehouse) must be a folder, or one
    that can be made: checked once here, instead of failing in whatever writes there first."""
    folder = state_dir(env)
    source = f"{STATE_ENV}={env[STATE_ENV]}" if env.get(STATE_ENV) else f"state folder {folder}"
    existing = next(p for p in (folder, *folder.parents) if p.exists())
    if not existing.is_dir():
        raise ConfigError(f"{source} cannot be used: {existing} is a file, not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(f"{source} cannot be used: {existing} is not writable")


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"config file {path} is missing") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        raise ConfigError(
            f"{path}{where} is not valid YAML: {getattr(err, 'problem', err)}"
        ) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path} must hold a mapping of sections, not {type(data).__name__}")
    return data


def _env_overrides(env: Mapping[str, str]) -> dict[str, Any]:
    overrides: dict[str, Any] = {}
    for name, raw in env.items():
        if not name.startswith(ENV_PREFIX):
            continue
        keys = [k.lower() for k in name[len(ENV_PREFIX) :].split("__")]
        if not all(keys) or (len(keys) < 2 and keys[0] not in TOP_LEVEL_KEYS):
            raise ConfigError(f"{name}: expected TRIBUTARY__<SECTION>__<KEY>")
        spark_conf = keys[0] == "spark" and keys[1] == "conf" and len(keys) == 3
        if spark_conf:
            # Spark keys are case-sensitive and dotted, its values text: keep both as written.
            keys[2] = name[len(ENV_PREFIX) :].split("__")[2]
        node = overrides
        for key in keys[:-1]:
            node = node.setdefault(key, {})
        if spark_conf:
            node[keys[-1]] = raw
            continue
        try:
            node[keys[-1]] = yaml.safe_load(raw) if raw.strip() else raw
        except yaml.YAMLError:
            node[keys[-1]] = raw
    return overrides


def _secret_values(env: Mapping[str, str]) -> dict[str, Any]:
    found = secrets.read_secrets(env)
    values: dict[str, Any] = {}
    if "S3_ACCESS_KEY" in found:
        values.setdefault("s3", {})["access_key"] = found["S3_ACCESS_KEY"]
    if "S3_SECRET_KEY" in found:
        values.setdefault("s3", {})["secret_key"] = found["S3_SECRET_KEY"]
    if "AIRFLOW_ADMIN_PASSWORD" in found:
        values["airflow"] = {"admin_password": found["AIRFLOW_ADMIN_PASSWORD"]}
    if "POSTGRES_PASSWORD" in found:
        values["cdc"] = {"password": found["POSTGRES_PASSWORD"]}
    return values


def _deep_merge(base: dict[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in top.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _deep_merge(dict(out[key]), value)
        else:
            out[key] = value
    return out


def _expand_placeholders(node: Any, values: Mapping[str, str]) -> Any:
    if isinstance(node, dict):
        return {k: _expand_placeholders(v, values) for k, v in node.items()}
    if isinstance(node, str) and "{" in node:
        for key, value in values.items():
            node = node.replace("{" + key + "}", value)
        return os.path.expanduser(node)
    return node


def _describe(err: ValidationError, profile: str) -> str:
    lines = [f"invalid configuration (profile {profile!r}):"]
    for problem in err.errors():
        where = ".".join(str(p) for p in problem["loc"])
        env_name = ENV_PREFIX + "__".join(str(p).upper() for p in problem["loc"])
        given = problem.get("input")
        hidden = isinstance(given, dict) or where.endswith(("_key", "password"))
        shown = "" if hidden else f" (got {given!r})"
        lines.append(f"  {where}: {problem['msg']}{shown}; set it in config/ or {env_name}")
    return "\n".join(lines)
