"""`hmem serve`: the MCP tools over Streamable HTTP, reached with the Python SDK's own HTTP
client: many clients at once through one process, each token to its namespaces only."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp.client.streamable_http", reason="needs the mcp extra (mcp >= 2)")
from mcp import ClientSession  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from mcp.shared._httpx_utils import create_mcp_http_client  # noqa: E402

from hmem import Memory  # noqa: E402
from hmem.adapters.mcp_http import new_token  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
STARTUP = 90  # seconds for the server to listen (imports, on a loaded machine)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def tokens(tmp_path: Path) -> dict[str, str]:
    """Tokens for 'work' only and for 'work' and 'notes', in a tokens file."""
    made = {"work": new_token("agent-w", ["work"]), "both": new_token("agent-b", ["work", "notes"])}
    (tmp_path / "tokens.jsonl").write_text("".join(line + "\n" for _, line in made.values()))
    return {who: token for who, (token, _) in made.items()}


@pytest.fixture
def server(tmp_path: Path, tokens: dict[str, str]) -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "hmem", "--embedder", "none", "serve", "--path",
         str(tmp_path / "store"), "--namespace", "work", "--port", str(port),
         "--tokens", str(tmp_path / "tokens.jsonl")],
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=open(tmp_path / "serve.err", "w"))
    deadline = time.monotonic() + STARTUP
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            assert proc.poll() is None, (tmp_path / "serve.err").read_text()
            assert time.monotonic() < deadline, "hmem serve did not listen"
            time.sleep(0.1)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@asynccontextmanager
async def client(url: str, token: str | None) -> AsyncIterator[ClientSession]:
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    async with (create_mcp_http_client(headers=headers) as http,
                streamable_http_client(url, http_client=http) as (read, write),
                ClientSession(read, write) as session):
        await session.initialize()
        yield session


def text_of(result: Any) -> str:
    return "\n".join(getattr(c, "text", "") for c in result.content)


def run(body: Any) -> None:
    async def bounded() -> None:
        with anyio.fail_after(120):
            await body()

    anyio.run(bounded)


def test_many_clients_write_and_read_through_one_server(server: str, tokens, tmp_path) -> None:
    async def one(i: int) -> None:
        async with client(f"{server}/mcp", tokens["work"]) as s:
            written = await s.call_tool("remember", {"subject": f"agent{i}",
                                                     "text": f"Agent {i} likes tea number {i}"})
            assert "error" not in json.dumps(written.structured_content or {}), written

    async def body() -> None:
        async with anyio.create_task_group() as tg:
            for i in range(8):
                tg.start_soon(one, i)
        async with client(f"{server}/mcp", tokens["both"]) as s:
            tools = {t.name for t in (await s.list_tools()).tools}
            assert {"remember", "recall", "why", "history", "erase"} <= tools
            found = await s.call_tool("recall", {"query": "agent 5 tea", "limit": 3})
            assert "Agent 5 likes tea number 5" in text_of(found)
        async with client(f"{server}/ns/notes/mcp", tokens["both"]) as s:
            await s.call_tool("remember", {"subject": "maya", "text": "Maya hums"})

    run(body)
    with Memory(tmp_path / "store", namespace="work", read_only=True, embedder=None) as m:
        assert m.stats().facts == 8
    with Memory(tmp_path / "store", namespace="notes", read_only=True, embedder=None) as m:
        assert [f.text for f in m.history("maya")] == ["Maya hums"]


@pytest.mark.parametrize("who,path,status", [
    (None, "/mcp", 401),                      # no token
    ("forged", "/mcp", 401),                  # a token the file does not hold
    ("work", "/ns/notes/mcp", 403),           # a token that tries another namespace
    ("both", "/ns/hr/mcp", 404),              # a namespace the server does not serve
])
def test_a_request_reaches_only_its_tokens_namespaces(server: str, tokens, who, path,
                                                      status) -> None:
    token = {"forged": "hmem_not-a-token"}.get(who) or (tokens[who] if who else None)
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if token:
        headers["Authorization"] = f"Bearer {token}"

    async def body() -> None:
        async with create_mcp_http_client(headers=headers) as http:
            answer = await http.post(f"{server}{path}", content=json.dumps({
                "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                    "protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": {"name": "t", "version": "1"}}}))
            assert answer.status_code == status, answer.text

    run(body)


def test_a_request_body_over_the_limit_is_refused(server: str, tokens) -> None:
    async def body() -> None:
        async with create_mcp_http_client(headers={
            "Authorization": f"Bearer {tokens['work']}", "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream"}) as http:
            answer = await http.post(f"{server}/mcp", content=b"[" + b" " * (2 << 20) + b"]")
            assert answer.status_code == 413, answer.status_code

    run(body)


def test_serving_beyond_this_host_needs_tokens(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "hmem", "--embedder", "none", "serve", "--path",
                           str(tmp_path / "s"), "--host", "0.0.0.0", "--port", str(free_port())],
                          cwd=REPO, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 1 and "needs --tokens" in done.stderr, done.stderr[-1000:]
