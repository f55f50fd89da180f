"""Config: files, profiles, environment overrides, secrets, and clear errors."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from lakehouse.core.config import CONFIG_DIR, ConfigError, load_settings


def env(tmp_path: Path, **values: str) -> dict[str, str]:
    # A private cache/state folder so the developer's real secrets file is never read.
    return {"TRIBUTARY_CACHE": str(tmp_path / "cache"), **values}


def test_local_profile_is_the_default_and_keeps_the_lakehouse_in_the_state_folder(
    tmp_path: Path,
) -> None:
    settings = load_settings(environ=env(tmp_path))
    assert settings.profile == "local"
    assert settings.storage.root == str(tmp_path / "cache" / "state" / "lakehouse")
    assert not settings.storage.on_s3
    assert settings.spark.master == "local[*]"
    assert settings.kafka.retention_ms == -1


def test_profile_overlays_base(tmp_path: Path) -> None:
    settings = load_settings(environ=env(tmp_path, TRIBUTARY_PROFILE="minio"))
    assert settings.storage.root == "s3a://tributary/lakehouse"
    assert settings.storage.on_s3
    assert settings.kafka.topic == "events"  # from base.yaml, untouched by the profile


def test_cluster_profile_points_at_the_cluster_make_cluster_up_starts(tmp_path: Path) -> None:
    settings = load_settings(profile="cluster", environ=env(tmp_path))
    cluster = settings.cluster  # where infra/services/*_cluster.py start it
    assert settings.spark.master == f"spark://127.0.0.1:{cluster.spark_master_port}"
    brokers = ",".join(f"127.0.0.1:{port}" for port in cluster.kafka_ports)
    assert settings.kafka.bootstrap_servers == brokers
    assert settings.s3.endpoint == f"http://127.0.0.1:{cluster.minio_port}"
    assert len(cluster.kafka_ports) == 3 and len(cluster.spark_worker_ports) == 2


def test_environment_overrides_files_and_values_are_typed(tmp_path: Path) -> None:
    settings = load_settings(
        environ=env(
            tmp_path,
            TRIBUTARY__KAFKA__PARTITIONS="12",
            TRIBUTARY__KAFKA__BOOTSTRAP_SERVERS="broker-a:9092,broker-b:9092",
            **{"TRIBUTARY__SPARK__CONF__spark.executor.memory": "3g"},
        )
    )
    assert settings.kafka.partitions == 12
    assert settings.kafka.bootstrap_servers == "broker-a:9092,broker-b:9092"
    assert settings.spark.conf == {"spark.executor.memory": "3g"}


def test_settings_are_frozen(tmp_path: Path) -> None:
    settings = load_settings(environ=env(tmp_path))
    with pytest.raises(Exception, match="frozen"):
        settings.kafka.topic = "other"  # type: ignore[misc]


def test_secrets_come_from_the_environment_and_are_never_shown(tmp_path: Path) -> None:
    settings = load_settings(
        environ=env(
            tmp_path, TRIBUTARY_S3_ACCESS_KEY="ak-from-env", TRIBUTARY_S3_SECRET_KEY="sk-from-env"
        )
    )
    assert settings.s3.secret_key is not None
    assert settings.s3.secret_key.get_secret_value() == "sk-from-env"
    assert "sk-from-env" not in repr(settings)


def test_secrets_come_from_the_generated_file(tmp_path: Path) -> None:
    from lakehouse.core.secrets import ensure_secrets, read_secrets

    path, generated = ensure_secrets(env(tmp_path))
    assert path.stat().st_mode & 0o077 == 0, "the secrets file must be private"
    assert "AIRFLOW_ADMIN_PASSWORD" in generated
    assert ensure_secrets(env(tmp_path))[1] == [], "a second setup must keep the same secrets"
    settings = load_settings(environ=env(tmp_path))
    assert settings.airflow.admin_password is not None
    assert (
        settings.airflow.admin_password.get_secret_value()
        == read_secrets(env(tmp_path))["AIRFLOW_ADMIN_PASSWORD"]
    )
    assert settings.airflow.admin_password.get_secret_value() not in ("admin", "airflow")


def test_no_secret_means_none_not_a_default(tmp_path: Path) -> None:
    settings = load_settings(environ=env(tmp_path))
    assert settings.s3.access_key is None
    assert settings.airflow.admin_password is None


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("TRIBUTARY__KAFKA__PARTITIONS", "many", r"kafka\.partitions: .*integer.*'many'"),
        ("TRIBUTARY__KAFKA__PARTITIONS", "0", r"kafka\.partitions: .*greater than or equal to 1"),
        ("TRIBUTARY__SPARK__MASTER", "mesos://x", r"spark\.master"),
        ("TRIBUTARY__STORAGE__ROOT", "gs://bucket/x", r"local path or an s3a:// URI"),
        ("TRIBUTARY__KAFKA__NO_SUCH_KEY", "1", r"kafka\.no_such_key: Extra inputs"),
        ("TRIBUTARY__KAFKA", "1", r"TRIBUTARY__<SECTION>__<KEY>"),
        # Valid by pattern, but the JVM would not start, or the broker would refuse the name.
        ("TRIBUTARY__SPARK__DRIVER_MEMORY", "1k", r"driver_memory: .*at least 512m"),
        ("TRIBUTARY__KAFKA__TOPIC", "..", r"kafka\.topic: .*not a valid Kafka topic name"),
        ("TRIBUTARY__KAFKA__TOPIC", ".", r"kafka\.topic: .*not a valid Kafka topic name"),
    ],
)
def test_bad_values_give_one_clear_line(
    tmp_path: Path, variable: str, value: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        load_settings(environ=env(tmp_path, **{variable: value}))
    assert "Traceback" not in str(caught.value)


def test_bad_error_names_the_variable_to_fix(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(environ=env(tmp_path, TRIBUTARY__KAFKA__PARTITIONS="many"))
    assert "TRIBUTARY__KAFKA__PARTITIONS" in str(caught.value)


def test_unknown_profile_lists_the_known_ones(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"unknown profile 'prod'.*cluster, local, minio"):
        load_settings(environ=env(tmp_path, TRIBUTARY_PROFILE="prod"))


def copy_config(tmp_path: Path) -> Path:
    folder = tmp_path / "config"
    shutil.copytree(CONFIG_DIR, folder)
    return folder


def test_broken_yaml_names_the_file_and_line(tmp_path: Path) -> None:
    folder = copy_config(tmp_path)
    (folder / "local.yaml").write_text("kafka:\n  topic: [unclosed\n")
    with pytest.raises(ConfigError, match=r"local\.yaml line \d+ is not valid YAML"):
        load_settings(environ=env(tmp_path), config_dir=folder)


def test_a_profile_that_is_not_a_mapping_is_refused(tmp_path: Path) -> None:
    folder = copy_config(tmp_path)
    (folder / "local.yaml").write_text("- just\n- a list\n")
    with pytest.raises(ConfigError, match="must hold a mapping"):
        load_settings(environ=env(tmp_path), config_dir=folder)


def test_a_missing_base_file_is_reported(tmp_path: Path) -> None:
    folder = copy_config(tmp_path)
    (folder / "base.yaml").unlink()
    with pytest.raises(ConfigError, match=r"base\.yaml is missing"):
        load_settings(environ=env(tmp_path), config_dir=folder)


def test_enough_driver_memory_is_accepted_in_any_unit(tmp_path: Path) -> None:
    for size in ("512m", "1G", "600000k"):
        memory = load_settings(environ=env(tmp_path, TRIBUTARY__SPARK__DRIVER_MEMORY=size))
        assert memory.spark.driver_memory == size


def test_a_state_folder_under_a_file_is_refused_before_anything_writes(tmp_path: Path) -> None:
    a_file = tmp_path / "file"
    a_file.write_text("not a folder\n")
    with pytest.raises(ConfigError, match=f"TRIBUTARY_STATE={a_file}/state cannot be used: "):
        load_settings(environ=env(tmp_path, TRIBUTARY_STATE=str(a_file / "state")))
    # A state folder that does not exist yet is made by whoever writes there first.
    settings = load_settings(environ=env(tmp_path, TRIBUTARY_STATE=str(tmp_path / "new" / "s")))
    assert settings.storage.root == str(tmp_path / "new" / "s" / "lakehouse")


def test_cdc_settings_have_the_shop_database_and_its_secret(tmp_path: Path) -> None:
    from lakehouse.core.secrets import ensure_secrets, read_secrets

    ensure_secrets(env(tmp_path))
    settings = load_settings(environ=env(tmp_path))
    cdc = settings.cdc
    assert (cdc.database, cdc.user, cdc.schema_name) == ("shop", "tributary", "public")
    assert cdc.tables == ("users", "products", "orders")
    assert cdc.topic("orders") == "shop.public.orders"
    assert cdc.password is not None
    assert cdc.password.get_secret_value() == read_secrets(env(tmp_path))["POSTGRES_PASSWORD"]
    assert (settings.services.postgres_port, settings.services.connect_port) == (5433, 8083)
    assert cdc.database_port == settings.services.postgres_port
    assert cdc.connect_url == f"http://127.0.0.1:{settings.services.connect_port}"
    # Where Connect keeps its connectors and offsets: the names a default install always had.
    assert settings.services.connect_group_id == "tributary-connect"
    assert settings.services.connect_storage_topic_prefix == "connect"


def test_cdc_clients_follow_the_environment(tmp_path: Path) -> None:
    settings = load_settings(
        environ=env(
            tmp_path,
            TRIBUTARY__CDC__CONNECT_URL="http://connect:8083",
            TRIBUTARY__CDC__DATABASE_HOST="postgres",
            TRIBUTARY__CDC__TABLES="[users]",
        )
    )
    assert settings.cdc.connect_url == "http://connect:8083"
    assert settings.cdc.database_host == "postgres"
    assert settings.cdc.tables == ("users",)


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("TRIBUTARY__CDC__TABLES", "[Users]", "lower-case identifiers: Users"),
        ("TRIBUTARY__CDC__TABLES", "[users, users]", "listed twice"),
        ("TRIBUTARY__CDC__SLOT_NAME", "my-slot", r"cdc\.slot_name"),
        ("TRIBUTARY__CDC__CONNECT_URL", "connect:8083", r"cdc\.connect_url"),
        ("TRIBUTARY__SERVICES__CONNECT_GROUP_ID", "my group", r"services\.connect_group_id"),
        (
            "TRIBUTARY__SERVICES__CONNECT_STORAGE_TOPIC_PREFIX",
            "connect/",
            r"services\.connect_storage_topic_prefix",
        ),
    ],
)
def test_bad_cdc_values_are_refused(tmp_path: Path, name: str, value: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_settings(environ=env(tmp_path, **{name: value}))
