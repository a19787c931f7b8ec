"""Many agents, one memory: real stdio MCP servers, started as the README's one-line
configs start them, on one store at once, each writing and reading; every acknowledged write is
seen by the next read of every other; a library writer beside them uses shared=True."""

from __future__ import annotations

from pathlib import Path

import pytest

from hmem import Memory
from hmem.errors import StoreLocked

anyio = pytest.importorskip("anyio")
pytest.importorskip("mcp")

from tests.adapters.test_mcp import run, serve  # noqa: E402


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
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
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


class RawClient:
    """``hmem mcp`` spoken to line by line (JSON-RPC over stdio), as any MCP client does."""

    def __init__(self, store: Path, version: str = "2025-06-18") -> None:
        import json
        import os
        import subprocess
        import sys

        self.json = json
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "hmem", "mcp", "--path", str(store)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
            env={**os.environ, "HMEM_EMBEDDER": "none"},
        )
        self.send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": version, "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"}}})
        self.hello = self.receive()["result"]
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message: dict) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(self.json.dumps(message) + "\n")
        self.proc.stdin.flush()

    def receive(self) -> dict:
        assert self.proc.stdout is not None
        return self.json.loads(self.proc.stdout.readline())

    def remember(self, call_id: int, text: str, request_id: str) -> None:
        self.send({"jsonrpc": "2.0", "id": call_id, "method": "tools/call", "params": {
            "name": "remember",
            "arguments": {"subject": "maya", "text": text, "request_id": request_id}}})


def test_a_server_killed_mid_write_loses_no_ack_and_retries_store_nothing_twice(
    tmp_path: Path,
) -> None:
    """A client streams 40 remembers to its server, which is killed (SIGKILL) after 10 acks,
    while another client writes beside it. The client restarts its server and retries every
    call with the same request ids: each acknowledged id comes back unchanged, each write is
    stored exactly once, the other client's writes are intact, the log verifies."""
    import signal

    store = tmp_path / "store"
    victim = RawClient(store)
    texts = [f"Maya note {i} (qv{i})" for i in range(40)]
    for i, text in enumerate(texts):
        victim.remember(i + 1, text, f"req-{i}")

    async def beside() -> list[int]:
        async with serve(store) as other:
            return [(await other.ok("remember", subject="tom", text=f"Tom note {i}"))
                    ["structuredContent"]["id"] for i in range(10)]

    acked = {}
    while len(acked) < 10:
        reply = victim.receive()
        acked[reply["id"] - 1] = reply["result"]["structuredContent"]["id"]
    victim.proc.send_signal(signal.SIGKILL)
    victim.proc.wait()
    tom: list[int] = []

    async def body() -> None:
        tom.extend(await beside())
        async with serve(store) as again:  # the client's restarted server: it retries all
            for i, text in enumerate(texts):
                got = await again.ok("remember", subject="maya", text=text, request_id=f"req-{i}")
                fid = got["structuredContent"]["id"]
                assert acked.get(i, fid) == fid

    run(body)
    with Memory(store, read_only=True) as r:
        hits = r.recall("maya note", limit=100, subject="maya").hits
        assert sorted(h.text for h in hits) == sorted(texts)
        assert [r.get(i).text for i in tom] == [f"Tom note {i}" for i in range(10)]
        assert r.stats().facts == 50
        assert r.verify().ok


@pytest.mark.parametrize("version", ["2024-11-05", "2025-06-18"])
def test_a_client_of_an_older_protocol_version_is_served_in_it(tmp_path: Path, version) -> None:
    """An MCP client that speaks an older protocol version gets it back and its calls work;
    one that asks for a version nobody made is answered with the server's own (the client then
    decides, as the protocol says)."""
    client = RawClient(tmp_path / "store", version)
    try:
        assert client.hello["protocolVersion"] == version
        client.remember(1, "Maya swims", "r1")
        assert client.receive()["result"]["structuredContent"]["id"] == 1
    finally:
        client.proc.kill()
        client.proc.wait()
    future = RawClient(tmp_path / "store", "1999-01-01")
    try:
        assert future.hello["protocolVersion"] not in ("1999-01-01", "")
    finally:
        future.proc.kill()
        future.proc.wait()
