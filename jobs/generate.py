"""Send a realistic click stream, anomalies included, to Kafka and keep a ledger of it.

    python -m jobs.generate --count N [--rate R] [--seed S] [--start now|ISO-8601]
                            [--realtime] [--anomalies none|default|all] [--late F ...]
                            [--ledger PATH] [--topic T]

Without --realtime the records go out as fast as Kafka takes them, with event times spaced
at --rate events/s from --start; with it, sending is paced at --rate events/s of wall-clock
time. The ledger (one JSON line per record: what it is and where the pipeline must put it)
goes to <state>/ledgers/ unless --ledger says otherwise.

Exit status (jobs.contract): 0 sent, 1 Kafka or configuration failure, 2 bad arguments
(nothing sent).
"""

from __future__ import annotations

import argparse
import math
import re
import secrets
import signal
import sys
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from jobs.arguments import OneLineParser, fraction, positive_float, positive_int
from jobs.contract import Exit, exit_with
from lakehouse.core.config import ConfigError, Settings, get_settings
from lakehouse.core.kafka_io import KafkaUnavailableError
from lakehouse.core.paths import state_dir
from lakehouse.core.times import TimeRangeError, parse_iso
from lakehouse.generator.clickstream import (
    ANOMALY_KINDS,
    ANOMALY_PRESETS,
    GeneratorConfig,
    check_against_settings,
    ledger_problem,
    produce,
)

DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def start_time(text: str) -> datetime:
    """'now' or ISO-8601; a time without a zone is taken as UTC."""
    if text == "now":
        return datetime.now(UTC)
    try:
        return parse_iso(text)
    except TimeRangeError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is neither 'now' nor an ISO-8601 time like 2026-01-01T12:00:00Z"
        ) from None


def duration(text: str) -> timedelta:
    """'90s', '15m', '3h', '1d' or plain seconds."""
    number, unit = (text[:-1], text[-1]) if text[-1:] in DURATION_UNITS else (text, "s")
    try:
        seconds = float(number) * DURATION_UNITS[unit]
    except ValueError:
        seconds = math.nan
    if not math.isfinite(seconds):
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration like 15m or 3h")
    try:
        return timedelta(seconds=seconds)
    except OverflowError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is too long a duration (at most {timedelta.max.days} days)"
        ) from None


def topic_name(text: str) -> str:
    # Kafka refuses "." and ".." although they match its character rule.
    if text in (".", "..") or not re.fullmatch(r"[A-Za-z0-9._-]{1,249}", text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a valid Kafka topic name")
    return text


def build_parser() -> OneLineParser:
    parser = OneLineParser(
        prog="python -m jobs.generate",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--count", type=positive_int, required=True, help="records to send")
    parser.add_argument(
        "--rate", type=positive_float, default=1000.0, help="events per second (default 1000)"
    )
    parser.add_argument("--seed", type=int, help="random seed (default: a fresh one, printed)")
    parser.add_argument(
        "--start",
        type=start_time,
        default="now",
        help="event time of the first event: 'now' (default) or ISO-8601",
    )
    parser.add_argument("--realtime", action="store_true", help="pace sending at --rate")
    parser.add_argument(
        "--anomalies",
        choices=sorted(ANOMALY_PRESETS),
        default="default",
        help="preset fractions: none, default (2%% of each kind; oversized 0.2%%, "
        "redelivery and invalid-utf8 1%%, ahead 0.1%%) or all (5%% of each; oversized 1%%, "
        "redelivery and invalid-utf8 2%%, ahead 0.2%%)",
    )
    for kind in ANOMALY_KINDS:
        parser.add_argument(
            "--" + kind.replace("_", "-"),
            type=fraction,
            metavar="F",
            help=f"fraction of {kind.replace('_', '-')} records (overrides the preset)",
        )
    parser.add_argument("--late-min", type=duration, default="15m", help="default 15m")
    parser.add_argument("--late-max", type=duration, default="3h", help="default 3h")
    parser.add_argument("--users", type=positive_int, default=200, help="default 200")
    parser.add_argument("--ledger", type=Path, help="default <state>/ledgers/<time>-seed<S>.jsonl")
    parser.add_argument("--topic", type=topic_name, help="default: the configured topic")
    return parser


def build_config(args: argparse.Namespace, settings: Settings, seed: int) -> GeneratorConfig:
    """Preset fractions, then per-kind flags on top. Raises ValueError when inconsistent."""
    preset = ANOMALY_PRESETS[args.anomalies]

    def share(kind: str) -> float:
        flag: float | None = getattr(args, kind)
        return preset.get(kind, 0.0) if flag is None else flag

    shares: dict[str, Any] = {kind: share(kind) for kind in ANOMALY_KINDS}
    return GeneratorConfig(
        count=args.count,
        seed=seed,
        start=args.start,
        rate=args.rate,
        users=args.users,
        **shares,
        late_min=args.late_min,
        late_max=args.late_max,
        max_record_bytes=settings.speed.max_record_bytes,
    )


def default_ledger(seed: int) -> Path:
    return state_dir() / "ledgers" / f"{datetime.now(UTC):%Y%m%dT%H%M%SZ}-seed{seed}.jsonl"


def print_summary(summary: dict[str, Any]) -> None:
    rate = summary["events_per_second"]
    print(
        f"==> sent {summary['sent']}/{summary['requested']} records to {summary['topic']!r} "
        f"in {summary['seconds']:.1f}s ({rate or 0:,.1f} events/s)"
    )
    print("    kinds:    " + " ".join(f"{k}={n}" for k, n in summary["kinds"].items() if n))
    print("    expected: " + " ".join(f"{k}={n}" for k, n in summary["expected"].items()))
    print(f"    ledger:   {summary['ledger']}")
    if summary["sent"] < summary["requested"]:
        print("    stopped early by a signal; the ledger lists every record sent")


def stop_on_signals() -> threading.Event:
    """Ctrl-C or SIGTERM (an Airflow task being killed) ends the run with a complete ledger."""
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    return stop


def main(argv: list[str]) -> Exit:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        settings = get_settings()
    except ConfigError as err:
        print(f"generate failed: {err}", file=sys.stderr)
        return Exit.CANNOT_RUN
    # A fresh seed by default: a seed fixes the event_ids, so repeating one into the
    # permanent topic would turn every event of the second run into a duplicate.
    seed = args.seed if args.seed is not None else secrets.randbelow(2**31)
    try:
        cfg = build_config(args, settings, seed)
        check_against_settings(cfg, settings, args.realtime)
    except ValueError as err:
        parser.error(str(err))
    ledger = args.ledger or default_ledger(seed)
    try:
        problem = ledger_problem(ledger)
    except OSError as err:
        problem = f"cannot check the ledger {ledger}: {err.strerror or err}"
    if problem and args.ledger:
        parser.error(problem)
    if problem:  # the default ledger: the state folder is the configuration's
        print(f"generate failed: {problem}", file=sys.stderr)
        return Exit.CANNOT_RUN
    topic = args.topic or settings.kafka.topic
    print(
        f"==> generating {cfg.count} records (seed {seed}, start {cfg.start:%Y-%m-%dT%H:%M:%SZ}, "
        f"{cfg.rate:g} events/s{', paced' if args.realtime else ''}) for topic {topic!r} "
        f"at {settings.kafka.bootstrap_servers}",
        flush=True,
    )
    from kafka.errors import KafkaError

    try:
        summary = produce(
            settings, cfg, ledger, topic=topic, realtime=args.realtime, stop=stop_on_signals()
        )
    except KafkaUnavailableError as err:
        print(f"generate failed: {err}", file=sys.stderr)
        return Exit.CANNOT_RUN
    except KafkaError as err:
        where = f"; the ledger {ledger} lists what was sent" if ledger.exists() else ""
        print(f"generate failed: Kafka error: {err}{where}", file=sys.stderr)
        return Exit.CANNOT_RUN
    except OSError as err:  # the ledger could not be written after all (checked above)
        print(f"generate failed: {err}", file=sys.stderr)
        return Exit.CANNOT_RUN
    print_summary(summary)
    return Exit.OK


if __name__ == "__main__":
    exit_with(main(sys.argv[1:]))
