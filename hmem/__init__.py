"""hmem: memory for AI agents as a boring, trustworthy database."""

from __future__ import annotations

from hmem import errors
from hmem.memory import Memory
from hmem.version import __version__

__all__ = ["Memory", "errors", "__version__"]
