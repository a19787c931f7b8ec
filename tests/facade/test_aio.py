"""AsyncMemory: Memory's calls awaited in worker threads, never on the event loop's thread."""

from __future__ import annotations

import asyncio
import inspect
import threading

import pytest

from hmem import Memory, errors
from hmem.aio import ASYNC_METHODS, AsyncMemory


def test_every_async_method_is_a_memory_method():
    assert all(callable(getattr(Memory, name, None)) for name in ASYNC_METHODS)


# Memory's public calls that AsyncMemory does not await: the seams (they hand out a lock or a
# view, used from a thread already), embedding helpers, and close (AsyncMemory has its own).
NOT_AWAITED = {"check_embedder_dims", "close", "embed_facts", "embedding_worker", "in_namespace",
               "reading", "transaction", "tx_time"}


def test_every_public_memory_call_is_awaited_or_named_as_not():
    """A call added to Memory must be added to AsyncMemory too (or named here, with why)."""
    public = {
        name for name in dir(Memory)
        if not name.startswith("_") and callable(getattr(Memory, name))
        and not isinstance(inspect.getattr_static(Memory, name), property)
    }
    assert public - NOT_AWAITED == set(ASYNC_METHODS)


def test_calls_run_off_the_loop_and_many_tasks_at_once_are_safe(tmp_path, monkeypatch):
    seen: list[int] = []
    real = Memory.recall

    def recall(self, *args, **kwargs):
        seen.append(threading.get_ident())
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Memory, "recall", recall)

    async def main() -> None:
        loop_thread = threading.get_ident()
        async with await AsyncMemory.open(tmp_path / "s", embedder=None) as m:
            ids = await asyncio.gather(*(m.remember("maya", f"Maya fact {i}") for i in range(20)))
            assert sorted(ids) == list(range(1, 21))  # every write landed, each its own seq
            hits = await m.recall("maya fact 7", limit=3)
            assert hits[0].text == "Maya fact 7"
            assert seen and loop_thread not in seen  # the loop's thread never ran the call
            other = m.in_namespace("work")
            await other.remember("atlas", "Atlas ships in May")
            assert (await m.stats()).facts == 20 and (await other.stats()).facts == 1
            with pytest.raises(errors.InvalidInput):  # errors arrive as the sync API raises them
                await m.recall("")
            with pytest.raises(AttributeError, match="awaits Memory's"):
                m.no_such_call  # noqa: B018
        with pytest.raises(errors.StoreClosed):
            await m.stats()

    asyncio.run(main())
