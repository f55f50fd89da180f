"""Send a seeded mix of order lifecycles and their payments to the commerce topics, with a
ledger of what the pipeline must do with each record.

    python -m jobs.generate_commerce --orders N [--seed S] [--start ISO-8601] [--ledger PATH]

N orders, one a minute from --start (default: early enough that every lifecycle has ended
by now), placed by users u0001..u0050: delivered or on their way, cancelled, some events out
of place (shipped before paid, paid after cancelled), some delivered twice; their payments
mostly within the hour, some late, missing, duplicated or a second one; a few records of each
topic cut short. The ledger (a JSON line per record: topic, partition, offset, kind, expected
fate) goes to <state>/ledgers/ unless --ledger says otherwise. Exit status (jobs.contract):
0 sent, 1 Kafka or configuration failure, 2 bad arguments (nothing sent).
"""

from __future__ import annotations

import argparse
import secrets
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from jobs.arguments import iso_moment, positive_int
from jobs.contract import Exit, exit_with, result_line
from jobs.parser import OneLineParser, writable_ledger
from lakehouse.core.config import ConfigError, get_settings
from lakehouse.core.kafka_io import KafkaUnavailableError
from lakehouse.generator.commerce import (
    CommerceConfig,
    default_ledger,
    produce,
    summary_lines,
)

JOB = "generate_commerce"


def build_parser() -> OneLineParser:
    parser = OneLineParser(
        prog="python -m jobs.generate_commerce",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--orders", type=positive_int, required=True, help="orders to place")
    parser.add_argument("--seed", type=int, help="random seed (default: a fresh one, printed)")
    parser.add_argument(
        "--start", type=iso_moment, help="when the first order is placed (ISO-8601)"
    )
    parser.add_argument("--ledger", type=Path, help="default <state>/ledgers/<time>-commerce-...")
    return parser


def main(argv: list[str]) -> Exit:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        settings = get_settings()
    except ConfigError as err:
        print(f"{JOB} failed: {err}", file=sys.stderr)
        return Exit.CANNOT_RUN
    seed = args.seed if args.seed is not None else secrets.randbelow(2**31)
    now = datetime.now(UTC)
    try:
        cfg = CommerceConfig(orders=args.orders, seed=seed, start=args.start or now)
        if args.start is None:  # early enough that every lifecycle has ended by now
            cfg = CommerceConfig(
                orders=args.orders, seed=seed, start=now - (cfg.last_moment() - cfg.start)
            )
    except ValueError as err:
        parser.error(str(err))
    if cfg.last_moment() > now:
        parser.error(
            f"--start {args.start:%Y-%m-%dT%H:%M:%SZ} is too late: the lifecycles would end "
            f"after now; start at {now - (cfg.last_moment() - cfg.start):%Y-%m-%dT%H:%M:%SZ} "
            "or earlier"
        )
    ledger, problem = writable_ledger(parser, args.ledger, default_ledger(seed))
    if problem:
        print(f"{JOB} failed: {problem}", file=sys.stderr)
        return Exit.CANNOT_RUN
    print(f"==> generating {cfg.orders} orders (seed {seed}, from {cfg.start:%Y-%m-%dT%H:%M:%SZ})")
    try:
        summary = produce(settings, cfg, ledger, now=now + timedelta(seconds=1))
    except KafkaUnavailableError as err:
        print(f"{JOB} failed: {err}", file=sys.stderr)
        return Exit.CANNOT_RUN
    for line in summary_lines(summary):
        print(line)
    print(result_line(JOB, summary | {"seed": seed}))
    return Exit.OK


if __name__ == "__main__":
    exit_with(main(sys.argv[1:]))
