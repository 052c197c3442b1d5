"""A package's names imported on first use (PEP 562): a package whose modules are
engines of their own (``acp_pipes.replay.trace``: the replay as the agent, the re-drive)
or whose matching is heavy (``acp_pipes.sameness``) gives every public name at its top,
while importing one of its modules loads none of the others."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

__all__ = ["lazy_names"]


def lazy_names(package: str, home: dict[str, str]
               ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module ``__getattr__`` and ``__dir__`` of ``package`` whose public names
    live in its modules as ``home`` says (name -> module); a name is imported when first
    asked for, then kept in the package's namespace."""
    namespace = importlib.import_module(package).__dict__

    def getattr_(name: str) -> Any:
        module = home.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        namespace[name] = value
        return value

    def dir_() -> list[str]:
        return sorted(set(namespace) | set(home))

    return getattr_, dir_
