"""Every table the project writes reads cleanly in another Delta engine (delta-rs), after a
micro-batch holding every anomaly the generator makes and a record that is not UTF-8, and a
batch-layer run over it: bronze keeps bytes as bytes, never invalid UTF-8 in a string column."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from deltalake import DeltaTable

from lakehouse.batch.recompute import Interval, recompute_interval
from lakehouse.core.delta_io import delta_rs_location, table_exists
from lakehouse.core.frames import rows_frame
from lakehouse.core.tables import TABLES
from lakehouse.generator.clickstream import ANOMALY_PRESETS, GeneratorConfig, generate_records
from lakehouse.speed.micro_batch import MicroBatchProcessor, SpeedOutputs
from tests.micro_batches import query_checkpoint

KAFKA = (
    "key binary, value binary, topic string, partition int, offset long, timestamp timestamp, "
    "timestampType int"
)
NOT_UTF8 = b'{"event_id": "e-latin1", "page": "/\xe9t\xe9"}'  # Latin-1 "été"


def test_every_table_written_reads_in_delta_rs(spark, local_settings, tmp_path) -> None:
    now = datetime.now(UTC).replace(microsecond=0)
    hour = now.replace(minute=0, second=0) - timedelta(hours=1)
    cfg = GeneratorConfig(
        count=150, seed=5, start=hour, rate=0.05, now=now, **ANOMALY_PRESETS["all"]
    )
    sent = [(r.key.encode(), r.value) for r in generate_records(cfg)] + [(b"\xff", NOT_UTF8)]
    batch = rows_frame(
        spark, [(k, v, "events", 0, i, now, 0) for i, (k, v) in enumerate(sent)], KAFKA
    )
    checkpoint = query_checkpoint(tmp_path / "checkpoint", "q")
    MicroBatchProcessor(local_settings, SpeedOutputs.live(), str(checkpoint))(batch, 0)
    recompute_interval(spark, local_settings, Interval(hour, hour + timedelta(hours=1)), "r")

    read = {}
    for name, t in TABLES.items():
        if table_exists(spark, t, local_settings):
            uri, options = delta_rs_location(local_settings, t.path(local_settings))
            arrow = DeltaTable(uri, storage_options=options).to_pyarrow_table()
            arrow.validate(full=True)
            read[name] = arrow.to_pandas()
    assert {
        "bronze.events_raw",
        "bronze.quarantine",
        "silver.events",
        "batch.event_counts_1m",
    } <= set(read)
    assert len(read["bronze.events_raw"]) == len(sent)
    quarantine = read["bronze.quarantine"]
    [kept] = quarantine[quarantine["reason"] == "invalid_utf8"].to_dict("records")
    assert (kept["key"], kept["value"], kept["value_bytes"]) == (b"\xff", NOT_UTF8, len(NOT_UTF8))
    kinds = {r for reasons in quarantine["reasons"] for r in reasons}
    assert {"malformed_json", "oversized_record", "event_time_in_future", "invalid_utf8"} <= kinds
    assert {"wrong_type:amount", "wrong_type:event_time"} & kinds
