"""A PostgreSQL and a Kafka Connect of one test module's own, on the test run's Kafka.

The CDC modules capture through the test run's PostgreSQL and Connect, at the same time on the
other worker. A module that kills or restarts them runs on a pair of its own instead: its own
ports, state folder (data, pid files, logs) and database cluster, and a Connect group and
internal topics of its own, so that its Connect is a Connect cluster apart. The internal topics
are named under this run's topic prefix, which the run deletes at its end."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from infra.services.base import Context
from infra.services.connect import Connect
from infra.services.postgres import Postgres
from lakehouse.core.config import CdcSettings, Settings
from lakehouse.core.paths import state_dir
from lakehouse.core.processes import ServiceError, port_open
from tests.conftest import TOPIC_PREFIX

# The pair listens on the run's PostgreSQL and Connect ports plus the first of these shifts
# that finds both free: near the run's own ports, clear of its other services' ones.
PORT_SHIFTS = range(1, 40)


@dataclass(frozen=True)
class CdcPair:
    """The private PostgreSQL and Connect, as infra.services runs them."""

    ctx: Context

    @property
    def postgres(self) -> Postgres:
        return Postgres(self.ctx)

    @property
    def connect(self) -> Connect:
        return Connect(self.ctx)

    @property
    def cdc(self) -> CdcSettings:
        """The capture settings whose clients reach this pair."""
        return self.ctx.settings.cdc

    def ensure_up(self) -> None:
        """Start whichever of the two does not answer (a test before may have killed it)."""
        for service in (self.postgres, self.connect):
            if service.running() and service.healthy():
                continue
            service.stop()
            try:
                service.start()
            except ServiceError as err:
                pytest.fail(f"the private {service.name} of {self.ctx.state} did not start: {err}")


def pair_settings(base: Settings, shift: int) -> Settings:
    svc = base.services
    services = svc.model_copy(
        update={
            "postgres_port": svc.postgres_port + shift,
            "connect_port": svc.connect_port + shift,
            "connect_group_id": f"{TOPIC_PREFIX}connect",
            "connect_storage_topic_prefix": f"{TOPIC_PREFIX}connect",
        }
    )
    cdc = base.cdc.model_copy(
        update={
            "database_host": svc.bind_host,
            "database_port": services.postgres_port,
            "connect_url": f"http://{svc.bind_host}:{services.connect_port}",
        }
    )
    return base.model_copy(update={"services": services, "cdc": cdc})


def free_shift(base: Settings) -> int:
    svc = base.services
    for shift in PORT_SHIFTS:
        ports = (svc.postgres_port + shift, svc.connect_port + shift)
        if not any(port_open(svc.bind_host, port) for port in ports):
            return shift
    pytest.fail(
        f"no free port pair for a private PostgreSQL and Kafka Connect within "
        f"{PORT_SHIFTS.stop - 1} of {svc.postgres_port} and {svc.connect_port} on {svc.bind_host}"
    )


def stop_and_delete(ctx: Context) -> None:
    """Stop the pair (a run that died may have left it running) and delete its cluster; the
    state folder's logs stay for whoever looks at a failure."""
    Connect(ctx).stop()
    postgres = Postgres(ctx)
    postgres.stop()
    postgres.delete_cluster()


@contextlib.contextmanager
def private_cdc_pair(base: Settings, name: str) -> Iterator[CdcPair]:
    """A running pair in <test state>/<name>, stopped and its database deleted at the end.
    `base` gives the run's Kafka, ports and secrets."""
    state = state_dir() / name
    stop_and_delete(Context(settings=base, state=state))
    shutil.rmtree(state, ignore_errors=True)
    pair = CdcPair(Context(settings=pair_settings(base, free_shift(base)), state=state))
    try:
        pair.ensure_up()
        yield pair
    finally:
        stop_and_delete(pair.ctx)
