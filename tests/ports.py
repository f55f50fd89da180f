"""Real local ports for tests of services that are down: nothing stands in for a service."""

from __future__ import annotations

import socket


def closed_port() -> int:
    """A local port nothing listens on (the OS just handed it out, and it was let go)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
