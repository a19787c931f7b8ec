"""hmem: memory for AI agents as a boring, trustworthy database."""

from __future__ import annotations

from hmem import errors
from hmem.memory import Memory

__all__ = ["Memory", "errors"]
__version__ = "0.1.0"
