"""AsyncMemory: Memory's calls awaited in worker threads, never on the event loop's thread."""

from __future__ import annotations

import asyncio
import threading

import pytest

from hmem import Memory, errors
from hmem.aio import ASYNC_METHODS, AsyncMemory


def test_every_async_method_is_a_memory_method():
    assert all(callable(getattr(Memory, name, None)) for name in ASYNC_METHODS)


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
