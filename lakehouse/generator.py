"""A deterministic generator of click-stream events (see lakehouse.events for the contract)."""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

from lakehouse.events import EVENT_TYPES

PAGES = ("/", "/search", "/product", "/cart", "/checkout")


def generate_events(
    count: int, seed: int, start: datetime, users: int = 50
) -> Iterator[tuple[str, dict[str, Any]]]:
    """Yield (kafka key, event) pairs; the same seed and start give the same events."""
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
