"""Every table the speed layer writes reads cleanly in another Delta engine (delta-rs), after a
micro-batch holding every anomaly the generator makes and a record that is not UTF-8: bronze
keeps bytes as bytes, never invalid UTF-8 in a string column. (The batch layer's tables, after
a streamed day: tests/integration/test_batch_layer.py.)"""

from __future__ import annotations

from dataclasses import fields
from datetime import UTC, datetime, timedelta

from lakehouse.core.frames import rows_frame
from lakehouse.core.tables import Table
from lakehouse.generator.clickstream import (
    generate_records,
    preset_config,
)
from lakehouse.speed.micro_batch import MicroBatchProcessor
from lakehouse.speed.outputs import SpeedOutputs
from tests.delta_rs import read_every_table
from tests.micro_batches import query_checkpoint

KAFKA = (
    "key binary, value binary, topic string, partition int, offset long, timestamp timestamp, "
    "timestampType int"
)
NOT_UTF8 = b'{"event_id": "e-latin1", "page": "/\xe9t\xe9"}'  # Latin-1 "été"


def test_every_table_the_speed_layer_writes_reads_in_delta_rs(
    spark, local_settings, tmp_path
) -> None:
    now = datetime.now(UTC).replace(microsecond=0)
    hour = now.replace(minute=0, second=0) - timedelta(hours=1)
    cfg = preset_config("all", {}, count=150, seed=5, start=hour, rate=0.05, now=now)
    records = list(generate_records(cfg))
    sent = [(r.key.encode(), r.value) for r in records] + [(b"\xff", NOT_UTF8)]
    batch = rows_frame(
        spark, [(k, v, "events", 0, i, now, 0) for i, (k, v) in enumerate(sent)], KAFKA
    )
    checkpoint = query_checkpoint(tmp_path / "checkpoint", "q")
    MicroBatchProcessor(local_settings, SpeedOutputs.live(), str(checkpoint))(batch, 0)

    read = read_every_table(spark, local_settings)
    out = SpeedOutputs.live()
    written = [getattr(out, f.name) for f in fields(out)]
    assert set(read) == {t.name for t in written if isinstance(t, Table)}
    assert len(read["bronze.events_raw"]) == len(sent)
    quarantine = read["bronze.quarantine"]
    # The generator sends some too; this one is known by its key.
    mine = (quarantine["reason"] == "invalid_utf8") & (quarantine["key"] == b"\xff")
    [kept] = quarantine[mine].to_dict("records")
    assert (kept["key"], kept["value"], kept["value_bytes"]) == (b"\xff", NOT_UTF8, len(NOT_UTF8))
    kinds = {r for reasons in quarantine["reasons"] for r in reasons}
    expected = {r for record in records for r in record.ledger["expected_reasons"]}
    assert kinds == expected | {"invalid_utf8"}
    assert {"malformed_json", "oversized_record", "event_time_in_future", "invalid_utf8"} <= kinds
