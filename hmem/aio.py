"""``AsyncMemory``: the library for asyncio agent loops, without blocking the event loop.

Every call of :class:`~hmem.memory.Memory` may wait on the disk (fsync), DuckDB or an embedder;
``AsyncMemory`` runs each one in a worker thread (``asyncio.to_thread``) and awaits it, so the
loop keeps serving other tasks meanwhile. Calls from many tasks at once are safe: a ``Memory``
serialises them on its store's lock (see "Threads and asyncio" in docs/reference.md), in the
order they get it.

    async with await AsyncMemory.open("./agent-memory") as m:
        fid = await m.remember("maya", "Maya lives in London")
        hits = await m.recall("where does maya live")

The methods are ``Memory``'s, with the same arguments and results, awaited.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from typing import Any, Self

from hmem.errors import InvalidInput
from hmem.memory import Memory

__all__ = ["AsyncMemory", "ASYNC_METHODS"]

# Memory's calls that AsyncMemory awaits in a worker thread.
ASYNC_METHODS = frozenset({
    "remember", "remember_many", "revise", "forget", "record_embedding", "reembed", "add",
    "extract", "recall", "get", "why", "history", "episodes", "as_of", "beliefs", "snapshot",
    "diff", "stats", "sql", "events", "recalls", "replay_recall", "flush", "sync", "verify",
    "rebuild", "consolidate", "duplicate_of", "erase",
})


class AsyncMemory:
    """A :class:`~hmem.memory.Memory` whose calls are awaited (see the module docstring).

    Open it with ``await AsyncMemory.open(...)`` (opening replays or loads the store: it can
    take seconds), or wrap a ``Memory`` you opened. ``memory`` is the wrapped one.
    """

    def __init__(self, memory: Memory) -> None:
        if not isinstance(memory, Memory):
            raise InvalidInput("AsyncMemory wraps a Memory; open one with AsyncMemory.open(...)")
        self.memory = memory

    @classmethod
    async def open(cls, *args: Any, **kwargs: Any) -> Self:
        """``Memory(*args, **kwargs)``, opened in a worker thread."""
        return cls(await asyncio.to_thread(Memory, *args, **kwargs))

    def in_namespace(self, namespace: str, **overrides: Any) -> AsyncMemory:
        """An async view of another namespace of the same open store."""
        return AsyncMemory(self.memory.in_namespace(namespace, **overrides))

    @property
    def namespace(self) -> str:
        return self.memory.namespace

    @property
    def last_seq(self) -> int:
        return self.memory.last_seq

    async def close(self) -> None:
        """Finish background embeddings and close the store (in a worker thread)."""
        await asyncio.to_thread(self.memory.close)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __getattr__(self, name: str) -> Callable[..., Awaitable[Any]]:
        if name not in ASYNC_METHODS:
            calls = ", ".join(sorted(ASYNC_METHODS))
            raise AttributeError(f"AsyncMemory has no {name!r}; it awaits Memory's {calls}")
        method = getattr(self.memory, name)

        @functools.wraps(method)
        async def call(*args: Any, **kwargs: Any) -> Any:
            return await asyncio.to_thread(method, *args, **kwargs)

        return call
