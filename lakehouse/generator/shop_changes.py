"""A seeded change generator for the shop database change data capture reads.

`plan_changes` makes a deterministic sequence of row changes over the shop tables (infra/
postgres/schema.sql): first the dimension rows the click events refer to (users u0001..,
products p001.., lakehouse/generator/clickstream.py), then a mix of inserts, updates, deletes
and, if asked, primary-key updates. `shop_apply.apply_changes` commits them to PostgreSQL at a
given rate and writes a ledger, one JSON line per committed change, so tests and
reconciliation can check that every change landed once (`final_rows` folds a ledger into the
rows it leaves).

The plan starts from the rows the database holds already under its keys
(`shop_apply.read_shop`): a second run continues the shop instead of colliding with the
first. It is deterministic per seed and starting rows. Only one generator may write a key
prefix at a time: a plan assumes no other writer changes its rows.
"""

from __future__ import annotations

import itertools
import math
import random
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from lakehouse.core.times import END, HANDLED, TimeRangeError, handled

if TYPE_CHECKING:
    pass

# Each table's primary key and columns, in the schema's order (infra/postgres/schema.sql).
TABLE_KEYS = {"users": "user_id", "products": "product_id", "orders": "order_id"}
TABLE_COLUMNS = {
    "users": ("user_id", "segment", "country", "updated_at"),
    "products": ("product_id", "name", "category", "price", "updated_at"),
    "orders": ("order_id", "user_id", "status", "total", "updated_at"),
}
TABLES = tuple(TABLE_KEYS)

INSERT, UPDATE, DELETE, KEY_UPDATE = "insert", "update", "delete", "key_update"
OPS = (INSERT, UPDATE, DELETE, KEY_UPDATE)
# What a change does to the shop, as the ledger's `change` names it.
SEED_USER, SEED_PRODUCT = "seed_user", "seed_product"
NEW_USER, NEW_PRODUCT, RELIST_PRODUCT, NEW_ORDER = (
    "new_user",
    "new_product",
    "relist_product",
    "new_order",
)
SEGMENT_CHANGE, COUNTRY_CHANGE, PRICE_CHANGE, TOTAL_CHANGE = (
    "segment_change",
    "country_change",
    "price_change",
    "total_change",
)
ORDER_PAID, ORDER_SHIPPED, ORDER_CANCELLED = "order_paid", "order_shipped", "order_cancelled"
DELIST_PRODUCT, DELETE_ORDER, REKEY_ORDER = "delist_product", "delete_order", "rekey_order"

SEGMENTS = ("new", "casual", "regular", "loyal", "vip")
COUNTRIES = ("DE", "FR", "NL", "ES", "IT", "PL", "SE", "GB", "US", "BR")
CATEGORIES = ("books", "music", "garden", "kitchen", "toys", "sports", "beauty", "tools")
ADJECTIVES = ("Classic", "Compact", "Deluxe", "Eco", "Pro", "Smart", "Tiny", "Vintage")
# Order status transitions: an order is placed, then paid and shipped, or cancelled before it
# ships. Shipped and cancelled orders change no more (they may still be deleted).
NEXT_STATUS = {"placed": ("paid", "cancelled"), "paid": ("shipped", "cancelled")}
STATUS_CHANGES = {"paid": ORDER_PAID, "shipped": ORDER_SHIPPED, "cancelled": ORDER_CANCELLED}
# Deleting a product delists it; at least this share of the catalogue stays listed, so the
# click events mostly find the products they name.
MIN_LISTED_SHARE = 0.5
KEY_PREFIX_PATTERN = r"[a-z0-9_-]{0,20}"
MAX_CHANGES = 10_000_000
ONE_MS = timedelta(milliseconds=1)


@dataclass(frozen=True)
class ChangeConfig:
    """What to change. The op shares are relative weights (they need not add up to 1).

    `count` changes follow the seed rows (one per dimension key the database lacks). The
    business clock starts at `start` and moves on by `step` on average per change; a key's
    `updated_at` only moves forward, past whatever the key held before. `key_prefix` is put
    before every key, so that a test's rows never meet another's or the shop's own.
    """

    count: int
    seed: int
    start: datetime
    users: int = 50
    products: int = 200
    inserts: float = 0.3
    updates: float = 0.55
    deletes: float = 0.1
    key_updates: float = 0.0
    step: timedelta = timedelta(seconds=1)
    key_prefix: str = ""

    def __post_init__(self) -> None:
        problems = config_problems(self)
        if problems:
            raise ValueError("invalid change generator config: " + "; ".join(problems))
        object.__setattr__(self, "start", self.start.astimezone(UTC))

    def op_weights(self) -> dict[str, float]:
        return dict(
            zip(OPS, (self.inserts, self.updates, self.deletes, self.key_updates), strict=True)
        )


def paced_step(rate: float | None) -> timedelta:
    """The business time between changes unless told: paced, the business clock keeps up
    with the wall clock; unpaced, a second a change."""
    return timedelta(seconds=1 / rate) if rate else timedelta(seconds=1)


def config_problems(cfg: ChangeConfig) -> list[str]:
    """Every reason `cfg` cannot be planned, each saying what to change."""
    problems = []
    if not 1 <= cfg.count <= MAX_CHANGES:
        problems.append(f"count must be from 1 to {MAX_CHANGES:,}, got {cfg.count}")
    if not 1 <= cfg.users <= 9_999:
        problems.append(f"users must be from 1 to 9999 (u0001..u9999), got {cfg.users}")
    if not 1 <= cfg.products <= 999:
        problems.append(f"products must be from 1 to 999 (p001..p999), got {cfg.products}")
    weights = cfg.op_weights()
    for op, weight in weights.items():
        if not (math.isfinite(weight) and weight >= 0):
            problems.append(f"the share of {op}s must be a finite number >= 0, got {weight}")
    if all(math.isfinite(w) and w >= 0 for w in weights.values()) and not any(weights.values()):
        problems.append("at least one of the op shares (inserts, updates, deletes) must be > 0")
    if not re.fullmatch(KEY_PREFIX_PATTERN, cfg.key_prefix):
        problems.append(
            f"key_prefix must be up to 20 of a-z, 0-9, '_' and '-', got {cfg.key_prefix!r}"
        )
    if cfg.step <= timedelta(0):
        problems.append(f"step must be > 0, got {cfg.step}")
    if cfg.start.tzinfo is None:
        problems.append("start must be timezone-aware (UTC)")
    if not problems:  # the clock's check needs a sane count, step and start
        problems += _clock_problems(cfg)
    return problems


def _clock_problems(cfg: ChangeConfig) -> list[str]:
    """The last change's clock must be a time Tributary handles: found out while applying, a
    bad one would stop the run half-way."""
    try:
        start = handled(cfg.start)
    except TimeRangeError as err:
        return [f"start {err}"]
    # Each step is at most twice the average; the seed rows take a step each too.
    seeds = cfg.users + cfg.products
    span = 2 * (cfg.count + seeds) * cfg.step.total_seconds()
    if start.timestamp() + span >= END.timestamp():
        return [
            f"{cfg.count} changes every {cfg.step} from {start:%Y-%m-%dT%H:%MZ} would run "
            f"past the times Tributary handles ({HANDLED})"
        ]
    return []


def user_key(number: int, prefix: str = "") -> str:
    """The click events' user id: u0001 (clickstream.py pads to at least four digits)."""
    return f"{prefix}u{number:04d}"


def product_key(number: int, prefix: str = "") -> str:
    """The click events' product id: p001."""
    return f"{prefix}p{number:03d}"


def order_key(number: int, prefix: str = "") -> str:
    return f"{prefix}o{number:08d}"


@dataclass(frozen=True)
class Change:
    """One row change: the row after it (None for a delete), and for a primary-key update the
    key it had before."""

    seq: int
    table: str
    op: str
    key: str
    row: dict[str, Any] | None
    change: str
    old_key: str | None = None

    def ledger_entry(self) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "seq": self.seq,
            "table": self.table,
            "op": self.op,
            "key": self.key,
        }
        if self.old_key is not None:
            entry["old_key"] = self.old_key
        entry["change"] = self.change
        entry["row"] = None if self.row is None else json_row(self.row)
        return entry


def json_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """A row as the ledger holds it: numerics as decimal text and times as ISO-8601 UTC with
    milliseconds, as Debezium sends them (decimal.handling.mode=string)."""
    return {name: json_value(value) for name, value in row.items()}


def json_value(value: Any) -> Any:
    if isinstance(value, Decimal):
        return f"{value:f}"
    if isinstance(value, datetime):
        text = value.astimezone(UTC).isoformat(timespec="milliseconds")
        return text.replace("+00:00", "Z")
    return value


Shop = dict[str, dict[str, dict[str, Any]]]  # table -> key -> row


def empty_shop() -> Shop:
    return {table: {} for table in TABLES}


def plan_changes(cfg: ChangeConfig, existing: Shop | None = None) -> Iterator[Change]:
    """The changes of `cfg`, in commit order, over a shop that holds `existing` (default:
    nothing under the config's keys); the same config and rows give the same changes."""
    return _Planner(cfg, existing or empty_shop()).changes()


class _Keys:
    """A set of keys with a seeded random pick in O(1): a list, and each key's place in it."""

    def __init__(self, keys: Sequence[str] = ()) -> None:
        self.items: list[str] = []
        self.places: dict[str, int] = {}
        for key in keys:
            self.add(key)

    def __len__(self) -> int:
        return len(self.items)

    def __contains__(self, key: object) -> bool:
        return key in self.places

    def add(self, key: str) -> None:
        if key not in self.places:
            self.places[key] = len(self.items)
            self.items.append(key)

    def remove(self, key: str) -> None:
        place = self.places.pop(key)
        last = self.items.pop()
        if last != key:  # the last key takes the removed one's place
            self.items[place] = last
            self.places[last] = place

    def pick(self, rng: random.Random) -> str:
        return self.items[rng.randrange(len(self.items))]


@dataclass
class _ShopState:
    """The planner's picture of the shop: every live row, which rows each change may touch,
    and each key's last clock (kept after a delete, so a key inserted again moves on)."""

    rows: Shop
    clocks: dict[tuple[str, str], datetime] = field(default_factory=dict)
    users: _Keys = field(default_factory=_Keys)
    listed: _Keys = field(default_factory=_Keys)  # products
    delisted: _Keys = field(default_factory=_Keys)  # products of the range, deleted
    open_orders: _Keys = field(default_factory=_Keys)  # placed or paid
    orders: _Keys = field(default_factory=_Keys)


class _Planner:
    def __init__(self, cfg: ChangeConfig, existing: Shop) -> None:
        self.cfg = cfg
        self.rng = random.Random(cfg.seed)
        self.clock = cfg.start
        self.seq = itertools.count()
        prefix = cfg.key_prefix
        self.state = _ShopState(rows={t: dict(existing.get(t, {})) for t in TABLES})
        for table, rows in self.state.rows.items():
            for key, row in rows.items():
                self.state.clocks[(table, key)] = row["updated_at"]
                self._track(table, key, row)
        self.next_user = _next_number(self.state.rows["users"], prefix + "u", cfg.users)
        self.next_product = _next_number(self.state.rows["products"], prefix + "p", cfg.products)
        self.next_order = _next_number(self.state.rows["orders"], prefix + "o", 0)
        self.op_bounds = list(itertools.accumulate(cfg.op_weights().values()))

    def changes(self) -> Iterator[Change]:
        yield from self._seed()
        for _ in range(self.cfg.count):
            yield self._one_change()

    # -- bookkeeping ------------------------------------------------------------------------

    def _track(self, table: str, key: str, row: Mapping[str, Any]) -> None:
        s = self.state
        if table == "users":
            s.users.add(key)
        elif table == "products":
            s.listed.add(key)
            if key in s.delisted:
                s.delisted.remove(key)
        else:
            s.orders.add(key)
            if row["status"] in NEXT_STATUS:
                s.open_orders.add(key)
            elif key in s.open_orders:
                s.open_orders.remove(key)

    def _untrack(self, table: str, key: str) -> None:
        s = self.state
        if table == "products":
            s.listed.remove(key)
            s.delisted.add(key)
        elif table == "orders":
            s.orders.remove(key)
            if key in s.open_orders:
                s.open_orders.remove(key)

    def _stamp(self, table: str, key: str) -> datetime:
        """The business clock for a change of `key`: the run's clock, or just past the key's
        last one when that is later (a row from an earlier run with a later start)."""
        last = self.state.clocks.get((table, key))
        stamp = self.clock if last is None or self.clock > last else last + ONE_MS
        self.state.clocks[(table, key)] = stamp
        return stamp

    def _tick(self) -> None:
        # Whole milliseconds, as the click events' times: from 1 ms to twice the average step.
        step_ms = max(1, round(self.cfg.step / ONE_MS))
        self.clock += ONE_MS * self.rng.randint(1, 2 * step_ms - 1 if step_ms > 1 else 1)

    def _emit(
        self,
        table: str,
        op: str,
        key: str,
        row: dict[str, Any] | None,
        change: str,
        old_key: str | None = None,
    ) -> Change:
        rows = self.state.rows[table]
        for gone in (old_key, None if row else key):
            if gone is not None:
                del rows[gone]
                self._untrack(table, gone)
        if row is not None:
            rows[key] = row
            self._track(table, key, row)
        return Change(next(self.seq), table, op, key, row, change, old_key)

    # -- the seed rows ----------------------------------------------------------------------

    def _seed(self) -> Iterator[Change]:
        prefix = self.cfg.key_prefix
        for number in range(1, self.cfg.users + 1):
            key = user_key(number, prefix)
            if key not in self.state.rows["users"]:
                self._tick()
                yield self._emit("users", INSERT, key, self._new_user(key), SEED_USER)
        for number in range(1, self.cfg.products + 1):
            key = product_key(number, prefix)
            if key not in self.state.rows["products"]:
                self._tick()
                yield self._emit("products", INSERT, key, self._new_product(key), SEED_PRODUCT)

    # -- the mix ----------------------------------------------------------------------------

    def _one_change(self) -> Change:
        self._tick()
        op = self._pick_op()
        # An op with nothing to act on (no open order to pay, no order to re-key) inserts.
        if op == UPDATE and (made := self._update()):
            return made
        if op == DELETE and (made := self._delete()):
            return made
        if op == KEY_UPDATE and self.state.orders:
            return self._rekey_order()
        return self._insert()

    def _pick_op(self) -> str:
        draw = self.rng.random() * self.op_bounds[-1]
        # Float rounding may leave a draw at the total: it is the last op's.
        return next(
            (op for op, bound in zip(OPS, self.op_bounds, strict=True) if draw < bound), OPS[-1]
        )

    def _insert(self) -> Change:
        s, prefix, draw = self.state, self.cfg.key_prefix, self.rng.random()
        if draw < 0.1 or not s.users:
            key = user_key(self.next_user, prefix)
            self.next_user += 1
            return self._emit("users", INSERT, key, self._new_user(key), NEW_USER)
        if draw < 0.2:
            if s.delisted and self.rng.random() < 0.7:
                key = s.delisted.pick(self.rng)
                return self._emit("products", INSERT, key, self._new_product(key), RELIST_PRODUCT)
            key = product_key(self.next_product, prefix)
            self.next_product += 1
            return self._emit("products", INSERT, key, self._new_product(key), NEW_PRODUCT)
        key = order_key(self.next_order, prefix)
        self.next_order += 1
        return self._emit("orders", INSERT, key, self._new_order(key), NEW_ORDER)

    def _update(self) -> Change | None:
        s, draw = self.state, self.rng.random()
        if draw < 0.25 and s.users:
            key = s.users.pick(self.rng)
            row = dict(s.rows["users"][key], updated_at=self._stamp("users", key))
            if self.rng.random() < 0.7:
                row["segment"] = self._other(SEGMENTS, row["segment"])
                return self._emit("users", UPDATE, key, row, SEGMENT_CHANGE)
            row["country"] = self._other(COUNTRIES, row["country"])
            return self._emit("users", UPDATE, key, row, COUNTRY_CHANGE)
        if draw < 0.5 and s.listed:
            key = s.listed.pick(self.rng)
            row = dict(s.rows["products"][key], updated_at=self._stamp("products", key))
            row["price"] = _money(float(row["price"]) * self.rng.uniform(0.8, 1.25))
            return self._emit("products", UPDATE, key, row, PRICE_CHANGE)
        if not s.open_orders:
            return None
        key = s.open_orders.pick(self.rng)
        row = dict(s.rows["orders"][key], updated_at=self._stamp("orders", key))
        if row["status"] == "placed" and self.rng.random() < 0.2:
            row["total"] = _money(float(row["total"]) * self.rng.uniform(0.5, 1.5) + 0.01)
            return self._emit("orders", UPDATE, key, row, TOTAL_CHANGE)
        # Most orders go through; about one in six is cancelled.
        following = NEXT_STATUS[row["status"]]
        row["status"] = following[0] if self.rng.random() < 0.85 else following[1]
        return self._emit("orders", UPDATE, key, row, STATUS_CHANGES[row["status"]])

    def _delete(self) -> Change | None:
        s = self.state
        catalogue = len(s.listed) + len(s.delisted)
        if self.rng.random() < 0.3 and len(s.listed) > MIN_LISTED_SHARE * catalogue:
            key = s.listed.pick(self.rng)
            self._stamp("products", key)
            return self._emit("products", DELETE, key, None, DELIST_PRODUCT)
        if not s.orders:
            return None
        key = s.orders.pick(self.rng)
        self._stamp("orders", key)
        return self._emit("orders", DELETE, key, None, DELETE_ORDER)

    def _rekey_order(self) -> Change:
        """An order moved to a new order id: the row keeps its values, its key changes."""
        old = self.state.orders.pick(self.rng)
        self._stamp("orders", old)
        key = order_key(self.next_order, self.cfg.key_prefix)
        self.next_order += 1
        row = dict(
            self.state.rows["orders"][old], order_id=key, updated_at=self._stamp("orders", key)
        )
        return self._emit("orders", KEY_UPDATE, key, row, REKEY_ORDER, old_key=old)

    # -- rows -------------------------------------------------------------------------------

    def _new_user(self, key: str) -> dict[str, Any]:
        return {
            "user_id": key,
            "segment": self.rng.choice(SEGMENTS),
            "country": self.rng.choice(COUNTRIES),
            "updated_at": self._stamp("users", key),
        }

    def _new_product(self, key: str) -> dict[str, Any]:
        category = self.rng.choice(CATEGORIES)
        return {
            "product_id": key,
            "name": f"{self.rng.choice(ADJECTIVES)} {category} item {key}",
            "category": category,
            "price": _money(self.rng.lognormvariate(3.0, 0.9)),
            "updated_at": self._stamp("products", key),
        }

    def _new_order(self, key: str) -> dict[str, Any]:
        return {
            "order_id": key,
            "user_id": self.state.users.pick(self.rng),
            "status": "placed",
            "total": _money(self.rng.lognormvariate(3.5, 0.8)),
            "updated_at": self._stamp("orders", key),
        }

    def _other(self, choices: Sequence[str], current: str) -> str:
        return self.rng.choice([c for c in choices if c != current])


def _money(amount: float) -> Decimal:
    return Decimal(f"{max(amount, 0.01):.2f}")


def _next_number(rows: Mapping[str, Any], prefix: str, at_least: int) -> int:
    """One past the highest number among the keys `prefix`<digits>, and past `at_least`."""
    numbers = [int(key[len(prefix) :]) for key in rows if key[len(prefix) :].isdigit()]
    return max([at_least, *numbers]) + 1


def final_rows(entries: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str], Any]:
    """The rows a ledger's changes leave, (table, key) -> row, None for a key deleted (or
    moved to another key): what the table and silver.<table>_current must hold for them."""
    rows: dict[tuple[str, str], Any] = {}
    for entry in entries:
        if entry.get("old_key") is not None:
            rows[(entry["table"], entry["old_key"])] = None
        rows[(entry["table"], entry["key"])] = entry["row"]
    return rows


def planned_count(cfg: ChangeConfig, existing: Shop | None = None) -> int:
    """How many changes `plan_changes` makes: a seed row per dimension key the shop lacks,
    then `count`."""
    rows = existing or empty_shop()
    missing_users = sum(
        user_key(n, cfg.key_prefix) not in rows["users"] for n in range(1, cfg.users + 1)
    )
    missing_products = sum(
        product_key(n, cfg.key_prefix) not in rows["products"] for n in range(1, cfg.products + 1)
    )
    return missing_users + missing_products + cfg.count
