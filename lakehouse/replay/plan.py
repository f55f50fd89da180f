"""Kappa replays: run the speed layer's own code over the Kafka log from an earlier point,
into a new versioned output (`replay_<version>.*`), with its own checkpoint and writer id.

This module plans a replay (where each partition starts and ends, what retention has already
deleted) and reports its progress; jobs/replay.py runs it, lakehouse/replay/versions.py promotes it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from lakehouse.core.config import Settings
from lakehouse.core.kafka_offsets import log_bounds, offsets_at
from lakehouse.core.times import TimeRangeError, handled

StartKind = Literal["earliest", "timestamp", "offsets"]
VERSION_PATTERN = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
# Without a rate measured by an earlier replay, estimates use this (events/s: a speed-layer
# catch-up on a 2-core machine, docs/performance.md).
DEFAULT_RATE = 7_500.0
MIN_RATE_RECORDS = 100_000  # replays smaller than this do not set the estimate
# What a replay takes before its first record, whatever its size: the job's JVM, its
# SparkSession and the query's first plan, on a 2-core machine (docs/performance.md).
STARTUP_SECONDS = 25.0


class ReplayRequestError(ValueError):
    """The replay asked for cannot run as asked; the message says why and what to do."""


def check_continuation(extend: str | None, given: dict[str, object]) -> None:
    """A replay that continues where a version ended (`extend`, or a scheduled one when None)
    is told where by nothing else: `given` are the other options by flag, with their values."""
    conflicting = [flag for flag, value in given.items() if value]
    if conflicting:
        which = "--extend" if extend else "--scheduled"
        raise ReplayRequestError(
            f"{which} continues from where a version ended; it takes no {', '.join(conflicting)}"
        )
    if extend:
        check_version_name(extend)


def check_version_name(name: str) -> str:
    if not VERSION_PATTERN.fullmatch(name) or name == "live":
        raise ReplayRequestError(
            f"version {name!r} is not a simple identifier: use lowercase letters, digits and "
            "'_', starting with a letter (e.g. v3), and not 'live'"
        )
    return name


@dataclass(frozen=True)
class ReplayStart:
    kind: StartKind
    timestamp: datetime | None = None
    offsets: dict[int, int] | None = None
    continues: str | None = None  # an extension: the version whose last run ended at `offsets`

    @classmethod
    def parse(
        cls, kind: str, timestamp: datetime | None, offsets: str | None, now: datetime
    ) -> ReplayStart:
        """From the CLI's or the DAG form's fields; refuses conflicting or missing options."""
        if kind == "earliest":
            if timestamp is not None or offsets:
                raise ReplayRequestError("start 'earliest' takes neither a timestamp nor offsets")
            return cls("earliest")
        if kind == "timestamp":
            if timestamp is None or offsets:
                raise ReplayRequestError("start 'timestamp' needs a timestamp and no offsets")
            try:
                # Kafka has no offset for a time before the epoch: its lookup would crash.
                timestamp = handled(timestamp)
            except TimeRangeError as err:
                raise ReplayRequestError(f"the start {err}") from None
            if timestamp > now:
                raise ReplayRequestError(
                    f"the start {timestamp.isoformat()} is in the future (now {now.isoformat()})"
                )
            return cls("timestamp", timestamp=timestamp)
        if kind == "offsets":
            if not offsets or timestamp is not None:
                raise ReplayRequestError(
                    'start \'offsets\' needs per-partition offsets (e.g. {"0": 120, "1": 0}) '
                    "and no timestamp"
                )
            return cls("offsets", offsets=parse_offsets(offsets))
        raise ReplayRequestError(f"unknown start {kind!r}: earliest, timestamp or offsets")

    def describe(self) -> str:
        if self.continues:
            return (
                f"the end of {self.continues}: offsets {json.dumps(self.offsets, sort_keys=True)}"
            )
        if self.kind == "timestamp" and self.timestamp is not None:
            return f"timestamp {self.timestamp.isoformat()}"
        if self.kind == "offsets":
            return f"offsets {json.dumps(self.offsets, sort_keys=True)}"
        return "earliest"


def parse_offsets(text: str) -> dict[int, int]:
    problem = ReplayRequestError(
        f'offsets {text!r} are not a JSON object of partition -> offset, e.g. {{"0": 120}}'
    )
    try:
        raw = json.loads(text)
        parsed = {int(p): o for p, o in raw.items()}
    except (ValueError, TypeError, AttributeError):
        raise problem from None
    # int() would take true as 1 and 1.5 as 1: an offset must be written as a JSON integer
    # (and bool is an int subclass in Python).
    if any(type(o) is not int for o in parsed.values()):
        raise problem
    if any(p < 0 or o < 0 for p, o in parsed.items()):
        raise ReplayRequestError(f"offsets {text!r}: partitions and offsets must be >= 0")
    return parsed


@dataclass(frozen=True)
class PartitionPlan:
    partition: int
    start: int  # first offset to read
    end: int  # the log's end when planned (a live replay goes on past it)
    requested: int  # where the request wanted to start
    earliest: int  # the first offset the log still holds

    @property
    def records(self) -> int:
        return max(0, self.end - self.start)

    @property
    def missing(self) -> int:
        """Records the request wanted that retention has already deleted."""
        return max(0, self.earliest - self.requested)


@dataclass(frozen=True)
class ReplayPlan:
    topic: str
    start: ReplayStart
    partitions: list[PartitionPlan]
    forced: bool = False
    rate: float = DEFAULT_RATE
    notes: list[str] = field(default_factory=list)

    @property
    def records(self) -> int:
        return sum(p.records for p in self.partitions)

    @property
    def gaps(self) -> dict[int, int]:
        return {p.partition: p.missing for p in self.partitions if p.missing}

    @property
    def start_offsets(self) -> dict[int, int]:
        return {p.partition: p.start for p in self.partitions}

    @property
    def end_offsets(self) -> dict[int, int]:
        return {p.partition: p.end for p in self.partitions}

    def spark_starting_offsets(self) -> str:
        """Spark's Kafka source option: exact offsets for every partition."""
        return json.dumps({self.topic: {str(p): o for p, o in self.start_offsets.items()}})

    def estimated_seconds(self) -> float:
        return STARTUP_SECONDS + self.records / self.rate

    def report(self) -> str:
        lines = [f"replay of {self.topic!r} from {self.start.describe()}:"]
        lines += [
            f"  partition {p.partition}: offsets {p.start}..{p.end} ({p.records} records)"
            + (f", {p.missing} already deleted by retention" if p.missing else "")
            for p in self.partitions
        ]
        source = "the last replay's rate" if self.rate != DEFAULT_RATE else "a default rate"
        lines.append(
            f"  {self.records} records; about {self.estimated_seconds():.0f} s: "
            f"{STARTUP_SECONDS:.0f} s to start Spark, then {self.rate:.0f} records/s ({source})"
        )
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)


def plan_replay(
    settings: Settings,
    topic: str,
    start: ReplayStart,
    force: bool = False,
    rate: float | None = None,
) -> ReplayPlan:
    """Resolve the start to offsets per partition and check retention still holds them.

    Retention guard: a partition whose requested start is before the earliest offset the log
    still holds has lost records. Without `force` that refuses the replay; with it, the replay
    starts at what exists and the plan records the gap (its `gaps`).
    """
    bounds = log_bounds(settings, topic)
    if start.kind == "offsets":
        assert start.offsets is not None
        unknown = sorted(set(start.offsets) - set(bounds))
        if unknown:
            raise ReplayRequestError(
                f"topic {topic!r} has no partition {unknown}; it has {sorted(bounds)}"
            )
        requested = {p: start.offsets.get(p, bounds[p][1]) for p in bounds}
        beyond = {p: o for p, o in requested.items() if o > bounds[p][1]}
        if beyond:
            raise ReplayRequestError(
                f"offsets {beyond} are past the end of the log {_ends(bounds)}"
            )
    elif start.kind == "timestamp":
        assert start.timestamp is not None
        requested = offsets_at(settings, topic, start.timestamp)
        # The first record held is already after the moment: the records before it, which
        # retention deleted, may have been on or after the moment too.
        requested = {
            p: (0 if o == bounds[p][0] and bounds[p][0] > 0 else o) for p, o in requested.items()
        }
    else:
        requested = {p: 0 for p in bounds}
    partitions = [
        PartitionPlan(p, max(requested[p], earliest), end, requested[p], earliest)
        for p, (earliest, end) in sorted(bounds.items())
    ]
    plan = ReplayPlan(topic, start, partitions, force, rate or DEFAULT_RATE)
    if plan.gaps and not force:
        lost = ", ".join(
            f"partition {p.partition} holds offsets from {p.earliest}, "
            f"{p.missing} records before that are deleted"
            for p in partitions
            if p.missing
        )
        raise ReplayRequestError(
            f"the log no longer holds the requested start ({lost}): retention has deleted "
            "them. Replay from a later start, or force it to replay what exists and record "
            "the gap"
        )
    if plan.gaps:
        plan.notes.append(f"forced: replaying without {sum(plan.gaps.values())} deleted records")
    return plan


def plan_extension(
    settings: Settings,
    topic: str,
    version: str,
    ended_at: dict[int, int],
    rate: float | None = None,
) -> ReplayPlan:
    """Continue `version` over what the log gained since its last run ended at `ended_at`
    (per partition; a partition added since starts at 0). Its own checkpoint says where to
    resume; this plan is for the progress report and the guard: if retention has deleted
    records after that end, the version cannot continue and a new replay is needed."""
    bounds = log_bounds(settings, topic)
    start = ReplayStart("offsets", offsets=dict(ended_at), continues=version)
    partitions = []
    for p, (earliest, end) in sorted(bounds.items()):
        ended = ended_at.get(p, 0)
        partitions.append(PartitionPlan(p, max(ended, earliest), max(end, ended), ended, earliest))
    plan = ReplayPlan(topic, start, partitions, rate=rate or DEFAULT_RATE)
    if plan.gaps:
        lost = ", ".join(f"partition {p}: {n} records" for p, n in sorted(plan.gaps.items()))
        raise ReplayRequestError(
            f"retention has deleted records {version} has not read yet ({lost}), so it cannot "
            "continue without a gap: replay into a new version instead"
        )
    return plan


def _ends(bounds: dict[int, tuple[int, int]]) -> dict[int, int]:
    return {p: end for p, (_, end) in bounds.items()}


def records_done(plan: ReplayPlan, offsets: dict[int, int]) -> int:
    """Records processed so far, from the offsets a replay's query has reached."""
    return sum(
        max(0, min(offsets.get(p.partition, p.start), p.end) - p.start) for p in plan.partitions
    )


def measured_rate(settings: Settings) -> float | None:
    """Records/s of the newest replay that caught up (ops.replay_versions), read without
    Spark so a dry run answers in a second; None before the first replay or when storage
    cannot be read."""
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    from lakehouse.core.delta_io import delta_rs_location
    from lakehouse.core.tables import table

    # Storage without credentials (ValueError) or unreachable (delta-rs: OSError "Generic S3
    # error"): the rate only sharpens the estimate and a dry run needs nothing else from
    # storage, so a user still gets the plan, at the default rate (which the report says). A
    # real replay meets the storage problem at its own storage check, with its own message.
    try:
        uri, options = delta_rs_location(settings, table("ops.replay_versions").path(settings))
    except ValueError:
        return None
    if options is not None:
        options = {**options, "max_retries": "0"}  # the plan must not wait on storage
    try:
        rows = DeltaTable(uri, storage_options=options).to_pyarrow_table(
            columns=["event", "at", "rate", "records"]
        )
    except (TableNotFoundError, OSError):
        return None
    # A small replay's rate is mostly Spark's start-up: it would predict nothing.
    done = [
        r
        for r in rows.to_pylist()
        if r["event"] == "caught_up" and r["rate"] and (r["records"] or 0) >= MIN_RATE_RECORDS
    ]
    return float(max(done, key=lambda r: r["at"])["rate"]) if done else None
