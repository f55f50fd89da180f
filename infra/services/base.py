"""What every embedded service offers to `make up`, `make down` and `make status`."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path

from lakehouse.core.config import Settings
from lakehouse.core.processes import Proc


@dataclass(frozen=True)
class Context:
    settings: Settings
    state: Path  # service data lives in state/<service>/

    @property
    def run_dir(self) -> Path:  # pid files, and logs/ below it
        return self.state / "run"


class Service(ABC):
    name: str

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.data = ctx.state / self.name

    @abstractmethod
    def procs(self) -> list[Proc]:
        """The background processes that make up the service."""

    @abstractmethod
    def start(self) -> None:
        """Start the service and wait until it is healthy. Raises ServiceError."""

    @abstractmethod
    def healthy(self) -> bool:
        """Whether the service answers as it should, right now."""

    @abstractmethod
    def address(self) -> str:
        """Where users reach it."""

    def running(self) -> bool:
        return any(p.pid() is not None for p in self.procs())

    def stop(self) -> bool:
        stopped = False
        for proc in reversed(self.procs()):
            stopped = proc.stop() or stopped
        return stopped

    def proc(self, name: str) -> Proc:
        return Proc(name, self.ctx.run_dir)
