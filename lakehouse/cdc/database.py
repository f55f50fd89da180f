"""The shop database, PostgreSQL, as the `cdc` settings name it: one way to connect, and one
message that says what to do when it cannot be reached."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import psycopg

    from lakehouse.core.config import CdcSettings

CONNECT_TIMEOUT_SECONDS = 5


class CdcError(Exception):
    """Capture cannot be set up or reached; the message says what to do."""


class ShopUnavailableError(CdcError):
    """PostgreSQL cannot be reached or used; nothing was changed. The message says what to do."""


def connect(
    cdc: CdcSettings, application_name: str = "tributary", autocommit: bool = False
) -> psycopg.Connection[tuple[Any, ...]]:
    """A connection to the shop database, its session in UTC (a `with` block commits it)."""
    import psycopg

    if cdc.password is None:
        raise ShopUnavailableError(
            "no password for PostgreSQL (the generated secret POSTGRES_PASSWORD): run `make setup`"
        )
    try:
        return psycopg.connect(
            host=cdc.database_host,
            port=cdc.database_port,
            dbname=cdc.database,
            user=cdc.user,
            password=cdc.password.get_secret_value(),
            connect_timeout=CONNECT_TIMEOUT_SECONDS,
            application_name=application_name,
            autocommit=autocommit,
            options="-c TimeZone=UTC",
        )
    except psycopg.OperationalError as err:
        reason = first_line(err)
        # A server that answers but refuses the login was started with another secret.
        todo = (
            "the server was started with another POSTGRES_PASSWORD: restart it (`make down`, "
            "`make up`)"
            if "password authentication failed" in reason
            else "start it with `make up`"
        )
        raise ShopUnavailableError(
            f"PostgreSQL is not reachable at {cdc.database_host}:{cdc.database_port} (database "
            f"{cdc.database!r}, user {cdc.user!r}): {reason}; {todo}"
        ) from None


def first_line(err: Exception) -> str:
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    return lines[0] if lines else type(err).__name__
