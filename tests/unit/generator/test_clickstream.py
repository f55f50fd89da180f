"""The event generator: deterministic, one ledger entry per record, and every anomalous record
really is what its ledger entry says (checked by an independent reading of the contract)."""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from lakehouse.core.config import Settings
from lakehouse.core.events import (
    EVENT_TYPES,
    FIELDS,
    ISO_TIMESTAMP_PATTERN,
    MAX_EVENT_ID_LENGTH,
    REASON_BAD_EVENT_TYPE,
    REASON_CONFLICTING_DUPLICATE,
    REASON_EVENT_ID_TOO_LONG,
    REASON_FUTURE,
    REASON_INVALID_UTF8,
    REASON_MALFORMED,
    REASON_MISSING,
    REASON_NEGATIVE_AMOUNT,
    REASON_OVERSIZED,
    REASON_PURCHASE_WITHOUT_AMOUNT,
    REASON_WRONG_TYPE,
    REQUIRED_FIELDS,
)
from lakehouse.generator.clickstream import (
    ANOMALY_KINDS,
    ANOMALY_PRESETS,
    FATE_DUPLICATE,
    FATE_QUARANTINE,
    FATE_SILVER,
    GeneratedRecord,
    GeneratorConfig,
    check_against_settings,
    generate_events,
    generate_records,
    ledger_problem,
    preset_config,
    summary_lines,
)

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)  # the pinned "wall clock" of sending
START = datetime(2026, 3, 1, 11, 0, tzinfo=UTC)
TOLERANCE = timedelta(seconds=300)  # speed.future_tolerance_seconds in config/base.yaml
STRING_FIELDS = ("event_id", "event_type", "user_id", "session_id", "page", "product_id")
TIME_FIELDS = ("event_time", "sent_at")
ISO = re.compile(ISO_TIMESTAMP_PATTERN)


def make_config(**overrides: Any) -> GeneratorConfig:
    values: dict[str, Any] = {
        "count": 5000,
        "seed": 11,
        "start": START,
        "now": NOW,
        **ANOMALY_PRESETS["all"],
    }
    return GeneratorConfig(**(values | overrides))


@pytest.fixture(scope="module")
def cfg() -> GeneratorConfig:
    return make_config()


@pytest.fixture(scope="module")
def records(cfg: GeneratorConfig) -> list[GeneratedRecord]:
    return list(generate_records(cfg))


def of_kind(records: list[GeneratedRecord], kind: str) -> list[GeneratedRecord]:
    found = [r for r in records if r.ledger["kind"] == kind]
    assert len(found) >= 10, f"too few {kind} records to say anything"
    return found


def parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text)


def contract_reasons(value: bytes, kafka_time: datetime, max_bytes: int) -> list[str]:
    """The quarantine reasons lakehouse/core/events.py implies, read apart from the generator."""
    reasons = [REASON_OVERSIZED] if len(value) > max_bytes else []
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError:
        return [*reasons, REASON_INVALID_UTF8]
    try:
        event = json.loads(text)
    except json.JSONDecodeError:
        return [*reasons, REASON_MALFORMED]
    reasons += [f"{REASON_MISSING}:{name}" for name in REQUIRED_FIELDS if event.get(name) is None]
    for name in STRING_FIELDS + TIME_FIELDS:
        if event.get(name) is not None and not isinstance(event[name], str):
            reasons.append(f"{REASON_WRONG_TYPE}:{name}")
    amount = event.get("amount")
    if amount is None:
        if event.get("event_type") == "purchase":
            reasons.append(REASON_PURCHASE_WITHOUT_AMOUNT)
    elif isinstance(amount, bool) or not isinstance(amount, int | float):
        reasons.append(f"{REASON_WRONG_TYPE}:amount")
    elif event.get("event_type") == "purchase" and amount < 0:
        reasons.append(REASON_NEGATIVE_AMOUNT)
    if isinstance(event.get("event_type"), str) and event["event_type"] not in EVENT_TYPES:
        reasons.append(REASON_BAD_EVENT_TYPE)
    if isinstance(event.get("event_id"), str) and len(event["event_id"]) > MAX_EVENT_ID_LENGTH:
        reasons.append(REASON_EVENT_ID_TOO_LONG)
    event_time = event.get("event_time")
    if isinstance(event_time, str):
        if not ISO.match(event_time):
            reasons.append(f"{REASON_WRONG_TYPE}:event_time")
        elif parse_time(event_time) > kafka_time + TOLERANCE:
            reasons.append(REASON_FUTURE)
    return reasons


# -- determinism and the ledger ----------------------------------------------------------


def test_same_config_gives_identical_records(cfg: GeneratorConfig) -> None:
    first = [(r.key, r.value, r.ledger) for r in generate_records(cfg)]
    again = [(r.key, r.value, r.ledger) for r in generate_records(make_config())]
    assert first == again


def test_another_seed_gives_other_records(records: list[GeneratedRecord]) -> None:
    other = list(generate_records(make_config(seed=12)))
    assert [r.value for r in other] != [r.value for r in records]
    ids = {r.ledger["event_id"] for r in records} - {None}
    assert not ids & {r.ledger["event_id"] for r in other}


def test_ledger_has_one_entry_per_record_in_order(records: list[GeneratedRecord]) -> None:
    assert [r.ledger["seq"] for r in records] == list(range(len(records)))
    for record in records:
        entry = record.ledger
        assert entry["key"] == record.key
        assert entry["size"] == len(record.value)
        assert entry["expected"] in (FATE_SILVER, FATE_DUPLICATE, FATE_QUARANTINE)
        assert (entry["expected"] == FATE_QUARANTINE) == bool(entry["expected_reasons"])


def test_fractions_are_roughly_respected(
    cfg: GeneratorConfig, records: list[GeneratedRecord]
) -> None:
    counts = Counter(r.ledger["kind"] for r in records)
    for kind, share in cfg.fractions().items():
        mean = share * cfg.count
        spread = 4 * math.sqrt(cfg.count * share * (1 - share)) + 3
        assert abs(counts[kind] - mean) <= spread, f"{kind}: {counts[kind]} vs ~{mean:.0f}"


def test_no_anomalies_means_clean_events_only() -> None:
    cfg = make_config(**dict.fromkeys(ANOMALY_KINDS, 0.0))
    assert {r.ledger["kind"] for r in generate_records(cfg)} == {"ok"}


def test_every_record_triggers_exactly_its_reasons(
    cfg: GeneratorConfig, records: list[GeneratedRecord]
) -> None:
    for record in records:
        reasons = contract_reasons(record.value, NOW, cfg.max_record_bytes)
        # A conflict is not the record's own: it is its event_id's earlier delivery.
        own = set(record.ledger["expected_reasons"]) - {REASON_CONFLICTING_DUPLICATE}
        assert sorted(reasons) == sorted(own), record.ledger


def test_clean_events_are_realistic_and_in_event_time_order(
    cfg: GeneratorConfig, records: list[GeneratedRecord]
) -> None:
    clean = [r for r in records if r.ledger["kind"] == "ok"]
    events = [json.loads(r.value) for r in clean]
    assert all(list(e) == list(FIELDS) for e in events)
    times = [e["event_time"] for e in events]
    assert times == sorted(times), "only the ledger's out_of_order/late events go back in time"
    assert parse_time(times[0]) >= START
    types = Counter(e["event_type"] for e in events)
    assert types["page_view"] + types["click"] > 0.7 * len(events)
    assert set(types) == set(EVENT_TYPES)
    for event, record in zip(events, clean, strict=True):
        assert record.key == event["user_id"]
        assert event["session_id"].startswith(event["user_id"] + "-s")
        if event["event_type"] == "purchase":
            assert event["amount"] >= 0
            assert round(event["amount"], 2) == event["amount"]
        else:
            assert event["amount"] is None
        assert {k: record.ledger[k] for k in ("event_type", "user_id", "page", "amount")} == {
            k: event[k] for k in ("event_type", "user_id", "page", "amount")
        }
        assert record.ledger["event_time"] == event["event_time"]


def test_legacy_generate_events_still_gives_clean_events() -> None:
    events = list(generate_events(200, seed=1, start=START))
    assert len(events) == 200
    for key, event in events:
        value = json.dumps(event).encode()
        assert contract_reasons(value, NOW, 65536) == []
        assert key == event["user_id"]


# -- each anomaly is what the ledger says -------------------------------------------------


def test_out_of_order_events_are_seconds_to_a_minute_behind(
    records: list[GeneratedRecord],
) -> None:
    for record in of_kind(records, "out_of_order"):
        event = json.loads(record.value)
        behind = parse_time(record.ledger["clock"]) - parse_time(event["event_time"])
        assert timedelta(seconds=2) <= behind <= timedelta(seconds=60)
        assert record.ledger["expected"] == FATE_SILVER


def test_late_events_are_behind_the_clock_by_at_least_late_min(
    cfg: GeneratorConfig, records: list[GeneratedRecord]
) -> None:
    for record in of_kind(records, "late"):
        event = json.loads(record.value)
        behind = parse_time(record.ledger["clock"]) - parse_time(event["event_time"])
        assert cfg.late_min <= behind <= cfg.late_max
        assert event["sent_at"] == record.ledger["clock"]
        assert record.ledger["expected"] == FATE_SILVER


def test_duplicates_resend_the_bytes_and_key_of_an_accepted_event(
    records: list[GeneratedRecord],
) -> None:
    for record in of_kind(records, "duplicate"):
        original = records[record.ledger["duplicate_of"]]
        assert original.ledger["seq"] < record.ledger["seq"]
        assert original.ledger["expected"] == FATE_SILVER
        assert (record.key, record.value) == (original.key, original.value)
        assert record.ledger["event_id"] == original.ledger["event_id"]
        assert record.ledger["expected"] == FATE_DUPLICATE
        assert record.ledger["event_type"] is None, "counted once, under the original"


def test_redeliveries_reuse_an_accepted_event_s_id_and_say_something_else(
    records: list[GeneratedRecord],
) -> None:
    for record in of_kind(records, "redelivery"):
        original = records[record.ledger["duplicate_of"]]
        assert original.ledger["seq"] < record.ledger["seq"]
        assert original.ledger["expected"] == FATE_SILVER
        first, again = json.loads(original.value), json.loads(record.value)
        assert again["event_id"] == first["event_id"] == record.ledger["event_id"]
        changed = {k for k in first if first[k] != again[k]}
        assert changed in ({"event_time"}, {"page"}), changed
        if changed == {"event_time"}:
            assert parse_time(first["event_time"]) < parse_time(again["event_time"]) <= NOW
        assert record.ledger["expected"] == FATE_QUARANTINE
        assert record.ledger["expected_reasons"] == [REASON_CONFLICTING_DUPLICATE]

    def time_of(record: GeneratedRecord) -> str:
        return json.loads(record.value)["event_time"]

    redelivered = of_kind(records, "redelivery")
    shifted = [r for r in redelivered if time_of(r) != time_of(records[r.ledger["duplicate_of"]])]
    assert shifted, "some re-deliveries carry another event_time"


def test_an_event_ahead_is_hours_ahead_of_the_stream_never_of_the_wall_clock() -> None:
    records = list(generate_records(make_config(ahead=0.01)))
    for record in of_kind(records, "ahead"):
        clock, event_time = (parse_time(record.ledger[k]) for k in ("clock", "event_time"))
        assert event_time == min(clock + timedelta(hours=2), NOW) > clock + timedelta(minutes=30)
        assert record.ledger["expected"] == FATE_SILVER


def test_malformed_records_are_not_json(records: list[GeneratedRecord]) -> None:
    for record in of_kind(records, "malformed"):
        with pytest.raises(json.JSONDecodeError):
            json.loads(record.value)
        record.value.decode("utf-8")  # still text: the bronze layer keeps it as a string
        assert record.ledger["expected_reasons"] == [REASON_MALFORMED]
        assert record.ledger["event_id"] is None
        assert re.fullmatch(r"u\d{4}", record.key)


def test_wrong_type_records_carry_text_for_a_number_or_a_number_for_text(
    records: list[GeneratedRecord],
) -> None:
    seen = set()
    amounts = set()
    for record in of_kind(records, "wrong_type"):
        event = json.loads(record.value)
        (reason,) = record.ledger["expected_reasons"]
        if reason == f"{REASON_WRONG_TYPE}:amount":
            assert event["event_type"] == "purchase"
            assert isinstance(event["amount"], str)
            amounts.add("number as text" if re.fullmatch(r"\d+\.\d\d", event["amount"]) else "word")
        elif reason == f"{REASON_WRONG_TYPE}:user_id":
            assert isinstance(event["user_id"], int)
            assert record.key == f"u{event['user_id']:04d}", "sent under the user's key"
        else:
            assert reason == f"{REASON_WRONG_TYPE}:event_time"
            assert isinstance(event["event_time"], int)
            moment = datetime.fromtimestamp(event["event_time"] / 1000, UTC)
            assert moment <= NOW, "an epoch event_time must not also be in the future"
        seen.add(reason)
    assert len(seen) == 3 and amounts == {"number as text", "word"}


def test_invalid_utf8_records_are_json_in_another_encoding(records: list[GeneratedRecord]) -> None:
    for record in of_kind(records, "invalid_utf8"):
        with pytest.raises(UnicodeDecodeError):
            record.value.decode("utf-8")
        event = json.loads(record.value.decode("latin-1"))
        assert event["page"].startswith("caf\u00e9 ")
        assert record.ledger["expected_reasons"] == [REASON_INVALID_UTF8]
        assert record.ledger["event_id"] is None, "not readable: nothing to find it by"


def test_missing_field_records_miss_exactly_that_field(records: list[GeneratedRecord]) -> None:
    dropped = set()
    for record in of_kind(records, "missing_field"):
        event = json.loads(record.value)
        (reason,) = record.ledger["expected_reasons"]
        name = reason.removeprefix(f"{REASON_MISSING}:")
        assert set(FIELDS) - set(event) == {name}
        if name == "amount":
            assert event["event_type"] == "purchase"
        dropped.add(name)
    assert dropped == {*REQUIRED_FIELDS, "amount"}


def test_oversized_records_exceed_the_limit_and_are_otherwise_valid(
    cfg: GeneratorConfig, records: list[GeneratedRecord]
) -> None:
    for record in of_kind(records, "oversized"):
        assert len(record.value) > cfg.max_record_bytes
        event = json.loads(record.value)
        assert set(FIELDS) <= set(event)
        assert contract_reasons(record.value, NOW, 10**9) == []
        assert record.ledger["expected_reasons"] == [REASON_OVERSIZED]


def test_future_events_are_days_ahead_of_the_wall_clock(records: list[GeneratedRecord]) -> None:
    for record in of_kind(records, "future"):
        event_time = parse_time(json.loads(record.value)["event_time"])
        assert NOW + timedelta(days=1) < event_time <= NOW + timedelta(days=30)
        assert record.ledger["expected_reasons"] == [REASON_FUTURE]


def test_future_events_follow_the_real_clock_when_now_is_not_pinned() -> None:
    shares = dict.fromkeys(ANOMALY_KINDS, 0.0) | {"future": 0.3}
    cfg = make_config(**shares, now=None, count=300)
    before = datetime.now(UTC)
    futures = [r for r in generate_records(cfg) if r.ledger["kind"] == "future"]
    assert futures
    for record in futures:
        assert parse_time(json.loads(record.value)["event_time"]) > before + timedelta(days=1)


# -- configuration -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"count": 0}, "count must be >= 1"),
        ({"rate": 0}, "rate must be > 0"),
        ({"rate": -5.0}, "rate must be > 0"),
        ({"late": -0.1}, "late must be a fraction in"),
        ({"malformed": 1.5}, "malformed must be a fraction in"),
        ({"duplicate": 0.3, "late": 0.3}, "add up to"),
        ({"start": datetime(2026, 1, 1)}, "timezone-aware"),
        ({"late_min": timedelta(hours=4)}, "late_min <= late_max"),
        ({"users": 0}, "users must be >= 1"),
        ({"max_record_bytes": 300}, "max_record_bytes must be >="),
        ({"rate": math.inf}, "rate must be > 0 events/s and finite"),
        ({"rate": math.nan}, "rate must be > 0 events/s and finite"),
        # Event times outside the handled range would crash half-way through sending.
        ({"start": datetime(1, 1, 1, tzinfo=UTC), "late": 0.3}, "outside the times"),
        ({"start": datetime(1970, 1, 1, 1, tzinfo=UTC)}, "go back 3:00:00 before the start"),
        ({"late_max": timedelta(days=999_999_999)}, "before the start, past 1970-01-01"),
        ({"start": datetime(2999, 12, 20, tzinfo=UTC)}, "future events .* would run past"),
        ({"rate": 1e-300}, "10 events at 1e-300 events/s .* would run past the times"),
        ({"count": 10**400}, "would run past the times"),
    ],
)
def test_bad_config_is_refused(overrides: dict[str, Any], message: str) -> None:
    base: dict[str, Any] = {"count": 10, "seed": 1, "start": START}
    with pytest.raises(ValueError, match=message):
        GeneratorConfig(**(base | overrides))


def test_event_times_may_reach_the_start_of_the_handled_range() -> None:
    # Late events go back at most late_max (3 h): a start 3 h after the epoch is the first.
    cfg = make_config(count=2000, start=datetime(1970, 1, 1, 3, tzinfo=UTC))
    times = [
        parse_time(json.loads(r.value)["event_time"])
        for r in generate_records(cfg)
        if r.ledger["expected"] == FATE_SILVER
    ]
    assert min(times) >= datetime(1970, 1, 1, tzinfo=UTC)
    with pytest.raises(ValueError, match="past 1970-01-01"):
        make_config(start=datetime(1970, 1, 1, 2, 59, tzinfo=UTC))


def test_start_is_normalised_to_utc() -> None:
    plus_two = datetime(2026, 1, 1, 14, tzinfo=UTC).astimezone(datetime.now().astimezone().tzinfo)
    assert GeneratorConfig(count=1, seed=1, start=plus_two).start.tzinfo == UTC


def test_a_burst_that_outruns_the_wall_clock_is_refused(local_settings: Settings) -> None:
    # 600 s of event time sent in a burst starting now: the tail would look "future".
    burst = GeneratorConfig(count=600_000, seed=1, start=NOW, rate=1000)
    with pytest.raises(ValueError, match="future_tolerance_seconds"):
        check_against_settings(burst, local_settings, realtime=False, now=NOW)
    check_against_settings(burst, local_settings, realtime=True, now=NOW)
    earlier = GeneratorConfig(count=600_000, seed=1, start=NOW - timedelta(hours=1), rate=1000)
    check_against_settings(earlier, local_settings, realtime=False, now=NOW)


def test_a_record_limit_other_than_the_pipelines_is_refused(local_settings: Settings) -> None:
    cfg = GeneratorConfig(count=10, seed=1, start=START, max_record_bytes=2048)
    with pytest.raises(ValueError, match=r"speed\.max_record_bytes"):
        check_against_settings(cfg, local_settings, realtime=False, now=NOW)


# -- the ledger ----------------------------------------------------------------------------


def test_a_ledger_in_a_new_or_existing_folder_can_be_written(tmp_path: Path) -> None:
    assert ledger_problem(tmp_path / "ledger.jsonl") is None
    assert ledger_problem(tmp_path / "new" / "deeper" / "ledger.jsonl") is None
    (tmp_path / "old.jsonl").write_text("")
    assert ledger_problem(tmp_path / "old.jsonl") is None
    assert list(tmp_path.iterdir()) == [tmp_path / "old.jsonl"], "checking creates nothing"


def test_a_ledger_that_cannot_be_a_file_is_refused(tmp_path: Path) -> None:
    assert "is a folder" in str(ledger_problem(tmp_path))
    (tmp_path / "file").write_text("")
    problem = ledger_problem(tmp_path / "file" / "sub" / "ledger.jsonl")
    assert problem is not None and f"{tmp_path / 'file'} is a file, not a folder" in problem


def test_a_preset_gives_each_kind_its_share_and_a_flag_given_replaces_it() -> None:
    """A flag of 0 turns a kind off; a flag not given (None) keeps the preset's share."""
    fields = dict(count=10, seed=1, start=START)
    default = preset_config("default", dict.fromkeys(ANOMALY_KINDS), **fields)
    assert default.fractions() == ANOMALY_PRESETS["default"]
    changed = preset_config("default", {"late": 0.3, "duplicate": 0.0}, **fields)
    assert changed.fractions() == ANOMALY_PRESETS["default"] | {"late": 0.3, "duplicate": 0.0}
    assert preset_config("none", {"malformed": 0.1}, **fields).fractions() == (
        dict.fromkeys(ANOMALY_KINDS, 0.0) | {"malformed": 0.1}
    )
    with pytest.raises(ValueError, match="add up to"):
        preset_config("all", {"late": 0.9}, **fields)


def test_the_summary_says_what_was_sent_and_an_early_stop() -> None:
    summary = {
        "topic": "t", "sent": 3, "requested": 4, "seconds": 1.5, "events_per_second": 2.0,
        "kinds": {"clean": 2, "late": 1, "malformed": 0},
        "expected": {"silver": 3, "duplicate": 0, "quarantine": 0},
        "ledger": "/x.jsonl",
    }  # fmt: skip
    assert summary_lines(summary) == [
        "==> sent 3/4 records to 't' in 1.5s (2.0 events/s)",
        "    kinds:    clean=2 late=1",
        "    expected: silver=3 duplicate=0 quarantine=0",
        "    ledger:   /x.jsonl",
        "    stopped early by a signal; the ledger lists every record sent",
    ]
    assert len(summary_lines(summary | {"sent": 4})) == 4
