"""Deterministic click-stream generators (see lakehouse.core.events for the contract).

`generate_events` makes clean events only (demo and small tests). `generate_records` makes a
realistic stream with configurable anomalies, each record paired with a ledger entry that
says what it is and what the pipeline must do with it; `produce` sends that stream to Kafka
and writes the ledger, so tests can check every record's fate.

Times are whole milliseconds from here on: the JSON carries millisecond precision, and
integer arithmetic keeps "late by at least late_min" exact after formatting.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import random
import threading
import time
import uuid
from collections import Counter, deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lakehouse.core.events import (
    EVENT_TYPES,
    REASON_CONFLICTING_DUPLICATE,
    REASON_FUTURE,
    REASON_INVALID_UTF8,
    REASON_MALFORMED,
    REASON_MISSING,
    REASON_OVERSIZED,
    REASON_WRONG_TYPE,
    REQUIRED_FIELDS,
)
from lakehouse.core.paths import state_dir
from lakehouse.core.times import END, HANDLED, TimeRangeError, handled
from lakehouse.generator.ledger import sleep_until

if TYPE_CHECKING:
    from lakehouse.core.config import Settings

PAGES = ("/", "/search", "/product", "/cart", "/checkout")


def generate_events(
    count: int, seed: int, start: datetime, users: int = 50
) -> Iterator[tuple[str, dict[str, Any]]]:
    """Yield (kafka key, event) pairs of clean events; the same seed and start give the same."""
    rng = random.Random(seed)
    event_time = start.astimezone(UTC)
    for _ in range(count):
        event_time += timedelta(milliseconds=rng.randint(10, 2_000))
        user = f"u{rng.randint(1, users):04d}"
        event_type = rng.choices(EVENT_TYPES, weights=(60, 25, 10, 5))[0]
        product = f"p{rng.randint(1, 200):03d}" if event_type != "page_view" else None
        event = {
            "event_id": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
            "event_type": event_type,
            "user_id": user,
            "session_id": f"{user}-s{event_time:%Y%m%d%H}",
            "page": rng.choice(PAGES),
            "product_id": product,
            "amount": round(rng.uniform(1, 300), 2) if event_type == "purchase" else None,
            "event_time": event_time.isoformat().replace("+00:00", "Z"),
            "sent_at": event_time.isoformat().replace("+00:00", "Z"),
        }
        yield user, event


KINDS = (
    "ok",
    "out_of_order",
    "late",
    "duplicate",
    "malformed",
    "wrong_type",
    "missing_field",
    "oversized",
    "future",
    "redelivery",
    "ahead",
    "invalid_utf8",
)
ANOMALY_KINDS = KINDS[1:]
FATE_SILVER = "silver"
FATE_DUPLICATE = "duplicate"
FATE_QUARANTINE = "quarantine"

# Oversized records get a smaller share: each is ~250 normal records' worth of bytes, and at
# the same share they would be most of the stream's volume.
# An event far ahead gets a tiny one: the watermark waits for a few events of a partition to
# reach a time (lakehouse.transforms.lateness), and a stream mostly ahead is no longer "one
# event ahead of the rest".
ANOMALY_PRESETS: dict[str, dict[str, float]] = {
    "none": {},
    "default": dict.fromkeys(ANOMALY_KINDS, 0.02)
    | {"oversized": 0.002, "redelivery": 0.01, "ahead": 0.001, "invalid_utf8": 0.01},
    "all": dict.fromkeys(ANOMALY_KINDS, 0.05)
    | {"oversized": 0.01, "redelivery": 0.02, "ahead": 0.002, "invalid_utf8": 0.02},
}
MAX_ANOMALY_SHARE = 0.5

# Mostly browsing, a little buying: the share of each event type.
EVENT_MIX = {"page_view": 55, "click": 30, "add_to_cart": 10, "purchase": 5}
EVENT_NAMES = tuple(EVENT_MIX)
EVENT_WEIGHTS = tuple(EVENT_MIX.values())
PRODUCTS = 500
OUT_OF_ORDER_MS = (2_000, 60_000)
FUTURE_MS = (86_400_000 + 1, 30 * 86_400_000)
MAX_JITTER_MS = 50
# Duplicates re-send a recent event, as a producer retry or an at-least-once hop would.
DUPLICATE_WINDOW = 1_000
# A re-delivery says something else: a later event_time (by up to this, never past the wall
# clock) or, when the stream is too close to the clock for that, another page.
REDELIVERY_SHIFT_MS = (60_000, 2 * 3_600_000)
# An event this far ahead of the stream's clock (never past the wall clock), as when one
# current event is sent among a backlog of old ones.
AHEAD_MS = 2 * 3_600_000
# Ordinary events are ~330 bytes; the limit must leave them well clear of it.
MIN_RECORD_LIMIT = 1_024
# Oversized records must still fit Kafka's default 1 MB message limit to be delivered.
MAX_RECORD_LIMIT = 900_000
OVERSIZE_MARGIN = 1_024
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class GeneratorConfig:
    """What to generate. Fractions are shares of all records; the rest are clean events.

    `now` pins the wall clock that future events are measured from (tests); None reads the
    real clock as each future record is made, since the pipeline judges them against the
    Kafka timestamp, i.e. the time of sending.
    """

    count: int
    seed: int
    start: datetime
    rate: float = 1_000.0
    users: int = 200
    pages: tuple[str, ...] = PAGES
    out_of_order: float = 0.0
    late: float = 0.0
    duplicate: float = 0.0
    malformed: float = 0.0
    wrong_type: float = 0.0
    missing_field: float = 0.0
    oversized: float = 0.0
    future: float = 0.0
    redelivery: float = 0.0
    ahead: float = 0.0
    invalid_utf8: float = 0.0
    late_min: timedelta = timedelta(minutes=15)
    late_max: timedelta = timedelta(hours=3)
    max_record_bytes: int = 65_536
    now: datetime | None = None

    def __post_init__(self) -> None:
        problems = _config_problems(self)
        if problems:
            raise ValueError("invalid generator config: " + "; ".join(problems))
        object.__setattr__(self, "start", self.start.astimezone(UTC))
        object.__setattr__(self, "pages", tuple(self.pages))

    def fractions(self) -> dict[str, float]:
        return {kind: float(getattr(self, kind)) for kind in ANOMALY_KINDS}


def preset_config(
    preset: str, overrides: Mapping[str, float | None], **fields: Any
) -> GeneratorConfig:
    """A config with the anomaly fractions of `preset` (ANOMALY_PRESETS), each kind in
    `overrides` that is not None taking its place. Raises ValueError when inconsistent."""
    shares: dict[str, Any] = dict.fromkeys(ANOMALY_KINDS, 0.0) | ANOMALY_PRESETS[preset]
    shares |= {kind: share for kind, share in overrides.items() if share is not None}
    return GeneratorConfig(**fields, **shares)


def _config_problems(cfg: GeneratorConfig) -> list[str]:
    problems = []
    if cfg.count < 1:
        problems.append(f"count must be >= 1, got {cfg.count}")
    if not (cfg.rate > 0 and math.isfinite(cfg.rate)):
        problems.append(f"rate must be > 0 events/s and finite, got {cfg.rate:g}")
    if cfg.users < 1:
        problems.append(f"users must be >= 1, got {cfg.users}")
    if not cfg.pages:
        problems.append("pages must not be empty")
    if cfg.start.tzinfo is None:
        problems.append("start must be timezone-aware (UTC)")
    if cfg.now is not None and cfg.now.tzinfo is None:
        problems.append("now must be timezone-aware (UTC)")
    for kind, share in cfg.fractions().items():
        if not 0.0 <= share <= 1.0:
            problems.append(f"{kind} must be a fraction in [0, 1], got {share}")
    total = sum(cfg.fractions().values())
    if total > MAX_ANOMALY_SHARE:
        problems.append(f"the anomaly fractions add up to {total:.3g}; at most 0.5 is allowed")
    if not timedelta(0) < cfg.late_min <= cfg.late_max:
        problems.append(f"need 0 < late_min <= late_max, got {cfg.late_min} and {cfg.late_max}")
    if cfg.max_record_bytes < MIN_RECORD_LIMIT:
        problems.append(f"max_record_bytes must be >= {MIN_RECORD_LIMIT} for ordinary events")
    if cfg.oversized > 0 and cfg.max_record_bytes > MAX_RECORD_LIMIT:
        problems.append(
            f"max_record_bytes must be <= {MAX_RECORD_LIMIT} for oversized records "
            "to fit Kafka's 1 MB message limit"
        )
    if not problems:  # the time checks need a sane count, rate, start and lateness
        problems += _time_problems(cfg)
    return problems


def _time_problems(cfg: GeneratorConfig) -> list[str]:
    """Every event time must be one Tributary handles: found out while sending, a bad one
    would stop the run half-way, with records already in Kafka and no complete ledger."""
    try:
        start = handled(cfg.start)
    except TimeRangeError as err:
        return [f"start {err}"]
    start_ms = _to_ms(start)
    problems = []
    behind = max(cfg.late_max, timedelta(milliseconds=OUT_OF_ORDER_MS[1]))
    if start_ms - _ms(behind) < 0:
        problems.append(
            f"late and out-of-order events go back {behind} before the start, past 1970-01-01: "
            f"event times must be within the times Tributary handles ({HANDLED})"
        )
    # Floats: a tiny rate makes the span too large for any datetime or integer arithmetic.
    # Future events are placed ahead of the wall clock, which `now` may pin.
    try:
        span = cfg.count / cfg.rate
    except OverflowError:  # a count too large for a float
        span = math.inf
    last_clock = start_ms / 1_000 + span
    if cfg.now is not None and cfg.now.tzinfo is not None:
        last_clock = max(last_clock, cfg.now.timestamp())
    if last_clock + (MAX_JITTER_MS + FUTURE_MS[1]) / 1_000 >= END.timestamp():
        problems.append(
            f"{cfg.count} events at {cfg.rate:g} events/s from {start:%Y-%m-%dT%H:%MZ} "
            f"(and future events up to {FUTURE_MS[1] // 86_400_000} days ahead) would run past "
            f"the times Tributary handles ({HANDLED})"
        )
    return problems


@dataclass(frozen=True)
class GeneratedRecord:
    """One Kafka record and its ledger entry."""

    key: str
    value: bytes
    ledger: dict[str, Any]


def generate_records(cfg: GeneratorConfig) -> Iterator[GeneratedRecord]:
    """The records of `cfg`, in sending order; the same config gives the same records."""
    return _Stream(cfg).records()


class _Stream:
    """Holds the random state, the simulated clock and the recent events duplicates copy."""

    def __init__(self, cfg: GeneratorConfig) -> None:
        self.cfg = cfg
        self.rng = random.Random(cfg.seed)
        self.start_ms = _to_ms(cfg.start)
        self.spacing_ms = 1_000 / cfg.rate
        # Zipf-like: a few users and products are far busier than the rest.
        self.user_weights = list(itertools.accumulate(1 / k**0.8 for k in range(1, cfg.users + 1)))
        self.product_weights = list(itertools.accumulate(1 / k for k in range(1, PRODUCTS + 1)))
        self.page_weights = list(itertools.accumulate(1 / k for k in range(1, len(cfg.pages) + 1)))
        self.user_width = max(4, len(str(cfg.users)))
        self.kind_bounds = list(itertools.accumulate(cfg.fractions().values()))
        self.recent: deque[GeneratedRecord] = deque(maxlen=DUPLICATE_WINDOW)
        self.builders: dict[str, Callable[[int, int], GeneratedRecord]] = {
            "ok": self._ok,
            "out_of_order": self._out_of_order,
            "late": self._late,
            "duplicate": self._duplicate,
            "malformed": self._malformed,
            "wrong_type": self._wrong_type,
            "missing_field": self._missing_field,
            "oversized": self._oversized,
            "future": self._future,
            "redelivery": self._redelivery,
            "ahead": self._ahead,
            "invalid_utf8": self._invalid_utf8,
        }

    def records(self) -> Iterator[GeneratedRecord]:
        for seq in range(self.cfg.count):
            kind = self._pick_kind()
            if kind in ("duplicate", "redelivery") and not self.recent:
                kind = "ok"  # nothing sent yet to deliver again
            record = self.builders[kind](seq, self._clock_ms(seq))
            if record.ledger["expected"] == FATE_SILVER:
                self.recent.append(record)
            yield record

    def _pick_kind(self) -> str:
        draw = self.rng.random()
        for kind, bound in zip(ANOMALY_KINDS, self.kind_bounds, strict=True):
            if draw < bound:
                return kind
        return "ok"

    def _clock_ms(self, seq: int) -> int:
        # Jitter below one spacing keeps clean events in event-time order, so every
        # out-of-order event is one the ledger names.
        jitter = self.rng.randrange(max(1, min(MAX_JITTER_MS, int(self.spacing_ms))))
        return self.start_ms + int(seq * self.spacing_ms) + jitter

    # -- events -------------------------------------------------------------------------

    def _event(self, clock_ms: int, event_ms: int, event_type: str | None = None) -> dict[str, Any]:
        """A valid event that happened at `event_ms` and was sent at `clock_ms`."""
        rng = self.rng
        number = rng.choices(range(1, self.cfg.users + 1), cum_weights=self.user_weights)[0]
        user = f"u{number:0{self.user_width}d}"
        event_type = event_type or rng.choices(EVENT_NAMES, weights=EVENT_WEIGHTS)[0]
        product = None
        if event_type != "page_view":
            item = rng.choices(range(1, PRODUCTS + 1), cum_weights=self.product_weights)[0]
            product = f"p{item:03d}"
        return {
            "event_id": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
            "event_type": event_type,
            "user_id": user,
            "session_id": f"{user}-s{_from_ms(event_ms):%Y%m%d%H}",
            "page": self._page(event_type),
            "product_id": product,
            "amount": round(rng.lognormvariate(3.5, 0.8), 2) if event_type == "purchase" else None,
            "event_time": _iso(event_ms),
            "sent_at": _iso(clock_ms),
        }

    def _page(self, event_type: str) -> str:
        pages = self.cfg.pages
        if event_type == "purchase":
            return pages[-1]  # pages are in funnel order: purchases happen at its end
        if event_type == "add_to_cart":
            return self.rng.choice(pages[len(pages) // 2 :])
        return self.rng.choices(pages, cum_weights=self.page_weights)[0]

    # -- one builder per kind: (seq, clock_ms) -> record ----------------------------------

    def _ok(self, seq: int, clock_ms: int) -> GeneratedRecord:
        return self._valid(seq, clock_ms, "ok", clock_ms)

    def _out_of_order(self, seq: int, clock_ms: int) -> GeneratedRecord:
        behind = self.rng.randint(*OUT_OF_ORDER_MS)
        return self._valid(seq, clock_ms, "out_of_order", clock_ms - behind)

    def _late(self, seq: int, clock_ms: int) -> GeneratedRecord:
        behind = self.rng.randint(_ms(self.cfg.late_min), _ms(self.cfg.late_max))
        return self._valid(seq, clock_ms, "late", clock_ms - behind)

    def _valid(self, seq: int, clock_ms: int, kind: str, event_ms: int) -> GeneratedRecord:
        event = self._event(clock_ms, event_ms)
        return self._record(seq, clock_ms, kind, event, _dumps(event), ())

    def _duplicate(self, seq: int, clock_ms: int) -> GeneratedRecord:
        original = self.rng.choice(self.recent)
        ledger = _entry(
            seq,
            clock_ms,
            "duplicate",
            original.key,
            original.value,
            event_id=original.ledger["event_id"],
            duplicate_of=original.ledger["seq"],
        )
        return GeneratedRecord(original.key, original.value, ledger)

    def _redelivery(self, seq: int, clock_ms: int) -> GeneratedRecord:
        """An event_id delivered again by a client that rebuilt the event: the first
        delivery stays, this one is quarantined as a conflict."""
        original = self.rng.choice(self.recent)
        event = json.loads(original.value)
        room = self._wall_ms() - _parse_ms(event["event_time"])
        if room >= REDELIVERY_SHIFT_MS[0]:
            shift = self.rng.randint(REDELIVERY_SHIFT_MS[0], min(room, REDELIVERY_SHIFT_MS[1]))
            event["event_time"] = _iso(_parse_ms(event["event_time"]) + shift)
        else:
            event["page"] = next(p for p in (*self.cfg.pages, "/elsewhere") if p != event["page"])
        record = self._record(
            seq, clock_ms, "redelivery", event, _dumps(event), (REASON_CONFLICTING_DUPLICATE,)
        )
        record.ledger["duplicate_of"] = original.ledger["seq"]
        return record

    def _ahead(self, seq: int, clock_ms: int) -> GeneratedRecord:
        event_ms = max(clock_ms, min(clock_ms + AHEAD_MS, self._wall_ms()))
        return self._valid(seq, clock_ms, "ahead", event_ms)

    def _wall_ms(self) -> int:
        return _to_ms(self.cfg.now or datetime.now(UTC))

    def _malformed(self, seq: int, clock_ms: int) -> GeneratedRecord:
        event = self._event(clock_ms, clock_ms)
        text = _dumps(event)
        # Any proper prefix of a flat JSON object is unparseable: its closing brace is gone.
        value = text[: self.rng.randint(2, len(text) - 1)]
        record = self._record(seq, clock_ms, "malformed", event, value, (REASON_MALFORMED,))
        record.ledger["event_id"] = None  # the pipeline cannot read it back
        return record

    def _wrong_type(self, seq: int, clock_ms: int) -> GeneratedRecord:
        """A JSON value of another type than the contract's: text for the amount (a word, or
        a number written as text), a number for event_time or user_id."""
        variant = self.rng.randrange(4)
        key = None
        if variant < 2:
            event = self._event(clock_ms, clock_ms, event_type="purchase")
            event["amount"] = "abc" if variant == 0 else f"{event['amount']:.2f}"
            reason = f"{REASON_WRONG_TYPE}:amount"
        elif variant == 2:
            # Epoch milliseconds of the simulated clock: a number, but never a future time.
            event = self._event(clock_ms, clock_ms)
            event["event_time"] = clock_ms
            reason = f"{REASON_WRONG_TYPE}:event_time"
        else:
            event = self._event(clock_ms, clock_ms)
            key = event["user_id"]
            event["user_id"] = int(key.removeprefix("u"))
            reason = f"{REASON_WRONG_TYPE}:user_id"
        return self._record(seq, clock_ms, "wrong_type", event, _dumps(event), (reason,), key=key)

    def _invalid_utf8(self, seq: int, clock_ms: int) -> GeneratedRecord:
        """A client that encodes in Latin-1: the JSON is fine, its bytes are not UTF-8."""
        event = self._event(clock_ms, clock_ms)
        value = _dumps(event).encode().replace(b'"page":"', b'"page":"caf\xe9 ', 1)
        record = self._record(seq, clock_ms, "invalid_utf8", event, value, (REASON_INVALID_UTF8,))
        record.ledger["event_id"] = None  # the pipeline cannot read it back
        return record

    def _missing_field(self, seq: int, clock_ms: int) -> GeneratedRecord:
        # amount is required of purchases only, so dropping it needs a purchase.
        name = self.rng.choice((*REQUIRED_FIELDS, "amount"))
        event = self._event(clock_ms, clock_ms, "purchase" if name == "amount" else None)
        key = event["user_id"]
        del event[name]
        reason = f"{REASON_MISSING}:{name}"
        return self._record(
            seq, clock_ms, "missing_field", event, _dumps(event), (reason,), key=key
        )

    def _oversized(self, seq: int, clock_ms: int) -> GeneratedRecord:
        event = self._event(clock_ms, clock_ms)
        target = self.cfg.max_record_bytes + self.rng.randint(1, OVERSIZE_MARGIN)
        # A client attaching a debug blob: valid JSON, every field right, just too big.
        event["debug_payload"] = ""
        event["debug_payload"] = "x" * (target - len(_dumps(event)))
        value = _dumps(event)
        return self._record(seq, clock_ms, "oversized", event, value, (REASON_OVERSIZED,))

    def _future(self, seq: int, clock_ms: int) -> GeneratedRecord:
        event = self._event(clock_ms, self._wall_ms() + self.rng.randint(*FUTURE_MS))
        return self._record(seq, clock_ms, "future", event, _dumps(event), (REASON_FUTURE,))

    def _record(
        self,
        seq: int,
        clock_ms: int,
        kind: str,
        event: dict[str, Any],
        value: str | bytes,
        reasons: Sequence[str],
        key: str | None = None,
    ) -> GeneratedRecord:
        # A record without user_id still goes out under its user's key, as its client would.
        key = key or event["user_id"]
        data = value if isinstance(value, bytes) else value.encode()
        ledger = _entry(
            seq, clock_ms, kind, key, data, event_id=event.get("event_id"), reasons=reasons
        )
        if ledger["expected"] == FATE_SILVER:
            ledger.update({name: event[name] for name in ACCEPTED_FIELDS})
        return GeneratedRecord(key, data, ledger)


ACCEPTED_FIELDS = ("event_type", "user_id", "page", "amount", "event_time")
"""Ledger fields filled for accepted events: enough to recompute every view in pandas."""


def _entry(
    seq: int,
    clock_ms: int,
    kind: str,
    key: str,
    value: bytes,
    *,
    event_id: str | None,
    reasons: Sequence[str] = (),
    duplicate_of: int | None = None,
) -> dict[str, Any]:
    if kind == "duplicate":
        expected = FATE_DUPLICATE
    else:
        expected = FATE_QUARANTINE if reasons else FATE_SILVER
    return {
        "seq": seq,
        "kind": kind,
        "expected": expected,
        "expected_reasons": list(reasons),
        "key": key,
        "event_id": event_id,
        "duplicate_of": duplicate_of,
        **dict.fromkeys(ACCEPTED_FIELDS),
        "clock": _iso(clock_ms),
        "size": len(value),
    }


def _dumps(event: dict[str, Any]) -> str:
    return json.dumps(event, separators=(",", ":"))


def _to_ms(moment: datetime) -> int:
    return (moment.astimezone(UTC) - _EPOCH) // timedelta(milliseconds=1)


def _parse_ms(iso: str) -> int:
    return _to_ms(datetime.fromisoformat(iso.replace("Z", "+00:00")))


def _from_ms(ms: int) -> datetime:
    return _EPOCH + timedelta(milliseconds=ms)


def _ms(delta: timedelta) -> int:
    return delta // timedelta(milliseconds=1)


def _iso(ms: int) -> str:
    return _from_ms(ms).isoformat(timespec="milliseconds").replace("+00:00", "Z")


# -- sending ------------------------------------------------------------------------------


def check_against_settings(
    cfg: GeneratorConfig, settings: Settings, realtime: bool, now: datetime | None = None
) -> None:
    """Refuse a config whose ledger would mispredict what this pipeline does with it."""
    if cfg.max_record_bytes != settings.speed.max_record_bytes:
        raise ValueError(
            f"max_record_bytes is {cfg.max_record_bytes} but the pipeline quarantines above "
            f"speed.max_record_bytes={settings.speed.max_record_bytes}"
        )
    lead = clock_lead_seconds(cfg, realtime, now or datetime.now(UTC))
    tolerance = settings.speed.future_tolerance_seconds
    if lead > tolerance:
        raise ValueError(
            f"event times would run up to {lead:.0f}s ahead of the wall clock, past "
            f"speed.future_tolerance_seconds={tolerance}, so clean events would be quarantined "
            "as future: use realtime pacing, an earlier start, a higher rate or fewer events"
        )


def clock_lead_seconds(cfg: GeneratorConfig, realtime: bool, now: datetime) -> float:
    """How far clean event times can get ahead of the wall clock while being sent.

    Paced sending keeps the simulated clock at a fixed offset from the wall clock; a burst
    sends the whole simulated span almost at once.
    """
    span = 0.0 if realtime else (cfg.count - 1) / cfg.rate
    return (cfg.start - now).total_seconds() + span + MAX_JITTER_MS / 1_000


def produce(
    settings: Settings,
    cfg: GeneratorConfig,
    ledger_path: str | Path,
    topic: str | None = None,
    realtime: bool = False,
    progress_every: float = 5.0,
    stop: threading.Event | None = None,
) -> dict[str, Any]:
    """Send the records of `cfg` to Kafka and write the ledger; returns a summary.

    The ledger gets one JSON line per acknowledged record, in sending order, with the Kafka
    partition, offset and timestamp added. Setting `stop` ends the run early but cleanly:
    everything sent is acknowledged and in the ledger.
    """
    from lakehouse.core.kafka_io import ensure_topic, produce_records

    check_against_settings(cfg, settings, realtime)
    path = Path(ledger_path)
    problem = ledger_problem(path)
    if problem:
        raise ValueError(problem)
    path.parent.mkdir(parents=True, exist_ok=True)
    name = ensure_topic(settings, topic)
    in_flight: deque[dict[str, Any]] = deque()
    stopping = stop or threading.Event()

    def payloads() -> Iterator[tuple[bytes, bytes]]:
        paced_from = time.monotonic()
        for record in generate_records(cfg):
            if realtime:
                sleep_until(paced_from + record.ledger["seq"] / cfg.rate, stopping)
            if stopping.is_set():
                return
            in_flight.append(record.ledger)
            yield record.key.encode(), record.value

    started = time.monotonic()
    report_at = started + progress_every
    kinds: Counter[str] = Counter()
    fates: Counter[str] = Counter()
    with path.open("w") as ledger:
        for meta in produce_records(settings, payloads(), topic=name):
            entry = in_flight.popleft()
            entry.update(partition=meta.partition, offset=meta.offset, timestamp_ms=meta.timestamp)
            ledger.write(json.dumps(entry) + "\n")
            kinds[entry["kind"]] += 1
            fates[entry["expected"]] += 1
            if time.monotonic() >= report_at:
                report_at = time.monotonic() + progress_every
                _print_progress(kinds.total(), cfg.count, time.monotonic() - started)
    seconds = time.monotonic() - started
    sent = kinds.total()
    return {
        "topic": name,
        "sent": sent,
        "requested": cfg.count,
        "seconds": round(seconds, 3),
        "events_per_second": round(sent / seconds, 1) if seconds > 0 else None,
        "kinds": {kind: kinds[kind] for kind in KINDS},
        "expected": {fate: fates[fate] for fate in (FATE_SILVER, FATE_DUPLICATE, FATE_QUARANTINE)},
        "ledger": str(path),
    }


def ledger_problem(path: Path) -> str | None:
    """Why a ledger cannot be written at `path`, or None. Asked before anything reaches
    Kafka, and without creating anything: records sent without their ledger cannot be
    accounted for."""
    if path.is_dir():
        return f"the ledger {path} is a folder: give a file name"
    if path.exists():
        return None if os.access(path, os.W_OK) else f"the ledger {path} is not writable"
    folder = path.parent
    while not folder.exists():  # the folders mkdir would create
        folder = folder.parent
    if not folder.is_dir():
        return f"the ledger {path} cannot be written: {folder} is a file, not a folder"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"the ledger {path} cannot be written: {folder} is not writable"
    return None


def default_ledger(seed: int) -> Path:
    """Where a run's ledger goes unless told: the state folder's ledgers/, by time and seed."""
    return state_dir() / "ledgers" / f"{datetime.now(UTC):%Y%m%dT%H%M%SZ}-seed{seed}.jsonl"


def summary_lines(summary: Mapping[str, Any]) -> list[str]:
    """What `produce` sent, for a terminal or a task log."""
    rate = summary["events_per_second"]
    lines = [
        f"==> sent {summary['sent']}/{summary['requested']} records to {summary['topic']!r} "
        f"in {summary['seconds']:.1f}s ({rate or 0:,.1f} events/s)",
        "    kinds:    " + " ".join(f"{k}={n}" for k, n in summary["kinds"].items() if n),
        "    expected: " + " ".join(f"{k}={n}" for k, n in summary["expected"].items()),
        f"    ledger:   {summary['ledger']}",
    ]
    if summary["sent"] < summary["requested"]:
        lines.append("    stopped early by a signal; the ledger lists every record sent")
    return lines


def _print_progress(sent: int, total: int, seconds: float) -> None:
    print(f"    sent {sent}/{total} records, {sent / seconds:,.1f} events/s", flush=True)
