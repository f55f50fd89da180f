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
import secrets
import sys
from pathlib import Path

from jobs.arguments import (
    duration,
    fraction,
    positive_float,
    positive_int,
    start_time,
    topic_name,
)
from jobs.contract import Exit, exit_with
from jobs.parser import OneLineParser, writable_ledger
from lakehouse.core.config import ConfigError, get_settings
from lakehouse.core.kafka_io import KafkaUnavailableError
from lakehouse.core.processes import stop_on_signals
from lakehouse.generator.clickstream import (
    ANOMALY_KINDS,
    ANOMALY_PRESETS,
    check_against_settings,
    default_ledger,
    preset_config,
    produce,
    summary_lines,
)


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
        cfg = preset_config(
            args.anomalies,
            {kind: getattr(args, kind) for kind in ANOMALY_KINDS},
            count=args.count,
            seed=seed,
            start=args.start,
            rate=args.rate,
            users=args.users,
            late_min=args.late_min,
            late_max=args.late_max,
            max_record_bytes=settings.speed.max_record_bytes,
        )
        check_against_settings(cfg, settings, args.realtime)
    except ValueError as err:
        parser.error(str(err))
    ledger, problem = writable_ledger(parser, args.ledger, default_ledger(seed))
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
    for line in summary_lines(summary):
        print(line)
    return Exit.OK


if __name__ == "__main__":
    exit_with(main(sys.argv[1:]))
