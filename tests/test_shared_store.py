"""Many agents, one memory (issue 14): real stdio MCP servers, started as the README's one-line
configs start them, on one store at once, each writing and reading; every acknowledged write is
seen by the next read of every other; a library writer beside them uses shared=True."""

from __future__ import annotations

from pathlib import Path

import pytest

from hmem import Memory
from hmem.errors import StoreLocked

anyio = pytest.importorskip("anyio")
pytest.importorskip("mcp")

from tests.test_mcp import run, serve  # noqa: E402


def test_four_mcp_clients_on_one_store_write_and_read_at_once(tmp_path: Path) -> None:
    store = tmp_path / "store"
    names = ["ada", "bo", "cy", "di"]

    async def body() -> None:
        async with serve(store) as a, serve(store) as b, serve(store) as c, serve(store) as d:
            clients = dict(zip(names, (a, b, c, d), strict=True))
            # one at a time: each acknowledged write is seen by the next read of every other
            for r in range(3):
                for name, client in clients.items():
                    text = f"{name} logged entry zq{r}{name}"
                    got = await client.ok("remember", subject=name, text=text)
                    fid = got["structuredContent"]["id"]
                    for other in clients.values():
                        hits = (await other.ok("recall", query=f"zq{r}{name}"))
                        assert hits["structuredContent"]["hits"][0]["id"] == fid

            # all at once: 4 clients x 8 writes, then every client sees all 32
            async def writes(name: str) -> None:
                for i in range(8):
                    await clients[name].ok("remember", subject=name, text=f"{name} burst kx{i}")

            async with anyio.create_task_group() as tg:
                for name in names:
                    tg.start_soon(writes, name)
            for client in clients.values():
                hits = await client.ok("recall", query="burst", limit=50)
                texts = {h["text"] for h in hits["structuredContent"]["hits"]}
                assert {f"{n} burst kx{i}" for n in names for i in range(8)} <= texts
            # a library writer beside them shares too; a lifetime writer is refused, named
            with Memory(store, shared=True, embedder=None) as lib:
                fid = lib.remember("eve", "eve joined from a notebook")
            hits = await a.ok("recall", query="notebook")
            assert hits["structuredContent"]["hits"][0]["id"] == fid
            with pytest.raises(StoreLocked, match="shared=True"):
                Memory(store, embedder=None)

    run(body)
    with Memory(store, read_only=True) as r:
        assert r.stats().facts == 12 + 32 + 1
        assert r.verify().ok


RACER = """
import sys
from hmem import Memory
with Memory(sys.argv[1], shared=True, embedder=None) as m:
    ids = [m.remember(sys.argv[2], f"{sys.argv[2]} note {i}", dedup=False) for i in range(20)]
print(" ".join(map(str, ids)))
"""


def test_writers_racing_to_create_a_store_make_one_store(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    store = tmp_path / "new"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    procs = [subprocess.Popen([sys.executable, "-c", RACER, str(store), name],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for name in ("p", "q", "r", "s")]
    acked = {}
    for name, p in zip("pqrs", procs, strict=True):
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        acked[name] = [int(x) for x in out.split()]
    assert sorted(i for ids in acked.values() for i in ids) == list(range(1, 81))
    with Memory(store, read_only=True) as r:
        for name, ids in acked.items():
            assert [r.get(i).text for i in ids] == [f"{name} note {i}" for i in range(20)]
        assert r.verify().ok
    assert len(list(store.glob("keys.hmk"))) == 1  # one key file, made by whoever came first
