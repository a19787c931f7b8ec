"""hmem: memory for AI agents as a boring, trustworthy database."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hmem import errors

if TYPE_CHECKING:
    from hmem.memory import Memory

__all__ = ["Memory", "errors"]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    # Lazy so that `eventlog` (which imports hmem.errors) and `hmem.memory` (which imports
    # eventlog) can each be imported first.
    if name == "Memory":
        from hmem.memory import Memory

        return Memory
    raise AttributeError(f"module 'hmem' has no attribute {name!r}")
