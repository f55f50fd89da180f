"""A module imported on first use, for the few libraries that take seconds to import."""

from __future__ import annotations

import importlib
from typing import Any


class LazyModule:
    """Stands for the module `name`, imported at the first attribute read. Declare the real
    import under TYPE_CHECKING beside it, so that type checkers see the module itself."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attribute: str) -> Any:
        return getattr(importlib.import_module(self._name), attribute)
