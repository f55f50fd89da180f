"""Apply a seeded mix of inserts, updates and deletes to the shop database and keep a ledger.

    python -m jobs.generate_changes --count N [--rate R] [--seed S] [--start now|ISO-8601]
                                    [--step D] [--users 50] [--products 200]
                                    [--inserts W] [--updates W] [--deletes W] [--key-updates W]
                                    [--per-transaction K] [--key-prefix P] [--ledger PATH]

First the dimension rows the click events refer to (users u0001.., products p001..) that the
database lacks, then N changes: new users, products and orders; segment, country, price, total
and order status changes; products delisted and orders deleted; with --key-updates, orders
moved to a new order id. Without --rate the changes go in as fast as PostgreSQL takes them.
The ledger (a JSON line per committed change: table, op, key, row after, LSN, txid, time)
goes to <state>/ledgers/ unless --ledger says otherwise. Exit status (jobs.contract): 0 applied,
1 PostgreSQL or configuration failure and 2 bad arguments (nothing changed), 5 stopped part-way
(the ledger lists what was committed).
"""

from __future__ import annotations

import argparse
import secrets
import sys
from pathlib import Path

from jobs.arguments import duration, positive_float, positive_int, start_time
from jobs.contract import Exit, exit_with, result_line
from jobs.parser import OneLineParser, writable_ledger
from lakehouse.cdc.database import ShopUnavailableError
from lakehouse.core.config import ConfigError, get_settings
from lakehouse.core.processes import stop_on_signals
from lakehouse.generator.shop_apply import (
    ChangeApplyError,
    apply_changes,
    default_ledger,
    summary_lines,
)
from lakehouse.generator.shop_changes import ChangeConfig, paced_step

JOB = "generate_changes"


def build_parser() -> OneLineParser:
    parser = OneLineParser(
        prog="python -m jobs.generate_changes",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--count", type=positive_int, required=True, help="after the seed rows")
    parser.add_argument(
        "--rate", type=positive_float, help="changes per second (default: as fast as possible)"
    )
    parser.add_argument("--seed", type=int, help="random seed (default: a fresh one, printed)")
    parser.add_argument(
        "--start",
        type=start_time,
        default="now",
        help="business clock (updated_at) of the first change: 'now' (default) or ISO-8601",
    )
    parser.add_argument("--step", type=duration, help="business time a change (1/--rate, 1s)")
    parser.add_argument("--users", type=positive_int, default=50, help="u0001.. (default 50)")
    parser.add_argument("--products", type=positive_int, default=200, help="p001.. (default 200)")
    for op, share in (("inserts", 0.3), ("updates", 0.55), ("deletes", 0.1), ("key-updates", 0)):
        parser.add_argument(
            f"--{op}", type=float, default=share, metavar="W", help=f"share (default {share})"
        )
    parser.add_argument(
        "--per-transaction", type=positive_int, default=1, metavar="K", help="default 1"
    )
    parser.add_argument("--key-prefix", default="", help="before every key: a run's own rows")
    parser.add_argument(
        "--ledger", type=Path, help="default <state>/ledgers/<time>-changes-seed<S>.jsonl"
    )
    return parser


def main(argv: list[str]) -> Exit:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        settings = get_settings()
    except ConfigError as err:
        print(f"{JOB} failed: {err}", file=sys.stderr)
        return Exit.CANNOT_RUN
    # A fresh seed by default, as the event generator's: the run's rows differ each time.
    seed = args.seed if args.seed is not None else secrets.randbelow(2**31)
    try:
        cfg = ChangeConfig(
            count=args.count,
            seed=seed,
            start=args.start,
            users=args.users,
            products=args.products,
            inserts=args.inserts,
            updates=args.updates,
            deletes=args.deletes,
            key_updates=args.key_updates,
            step=args.step or paced_step(args.rate),
            key_prefix=args.key_prefix,
        )
    except ValueError as err:
        parser.error(str(err))
    ledger, problem = writable_ledger(parser, args.ledger, default_ledger(seed))
    if problem:  # the default ledger: the state folder is the configuration's
        print(f"{JOB} failed: {problem}", file=sys.stderr)
        return Exit.CANNOT_RUN
    cdc = settings.cdc
    pace = f"{args.rate:g} changes/s" if args.rate else "as fast as possible"
    print(
        f"==> generating {cfg.count} changes (seed {seed}, clock from "
        f"{cfg.start:%Y-%m-%dT%H:%M:%SZ}, {pace}) in {cdc.database} at "
        f"{cdc.database_host}:{cdc.database_port}",
        flush=True,
    )
    try:
        summary = apply_changes(
            cdc,
            cfg,
            ledger,
            rate=args.rate,
            per_transaction=args.per_transaction,
            stop=stop_on_signals(),
        )
    except ShopUnavailableError as err:
        print(f"{JOB} failed: {err}", file=sys.stderr)
        return Exit.CANNOT_RUN
    except ChangeApplyError as err:
        print(f"{JOB} failed: {err}", file=sys.stderr)
        return Exit.FAILED
    except OSError as err:  # the ledger could not be written after all (checked above)
        print(f"{JOB} failed: {err}", file=sys.stderr)
        return Exit.CANNOT_RUN
    for line in summary_lines(summary):
        print(line)
    print(result_line(JOB, summary | {"seed": seed}))
    return Exit.OK


if __name__ == "__main__":
    exit_with(main(sys.argv[1:]))
