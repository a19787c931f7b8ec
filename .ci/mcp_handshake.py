"""CI: an MCP client (the SDK's own) starts an installed `hmem mcp` over stdio, completes the
handshake, lists the tools, remembers and recalls. Exits non-zero on any failure.

    python .ci/mcp_handshake.py STORE_DIR /path/to/venv/bin/hmem
    python .ci/mcp_handshake.py STORE_DIR uvx --from "hmem[mcp] @ file://$PWD" hmem

(the command that runs hmem; `mcp --path STORE_DIR` is added to it)
"""

from __future__ import annotations

import os
import sys

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


async def handshake(store: str, command: list[str]) -> None:
    with anyio.fail_after(300):  # uvx may first resolve and install
        await _handshake(store, command)


async def _handshake(store: str, command: list[str]) -> None:
    params = StdioServerParameters(command=command[0],
                                   args=[*command[1:], "mcp", "--path", store],
                                   env={**os.environ, "HMEM_EMBEDDER": "none"})
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        info = await session.initialize()
        tools = {t.name for t in (await session.list_tools()).tools}
        assert {"remember", "recall", "why", "history"} <= tools, tools
        wrote = await session.call_tool(
            "remember", {"subject": "maya", "text": "Maya lives in Paris"})
        assert not getattr(wrote, "is_error", getattr(wrote, "isError", False)), wrote
        found = await session.call_tool("recall", {"query": "where does maya live"})
        text = found.content[0].text  # type: ignore[union-attr]
        assert "Maya lives in Paris" in text, text
        server = getattr(info, "server_info", None) or info.serverInfo  # mcp 2.x / 1.x
        print(f"mcp handshake ok: {server.name} {server.version}, "
              f"{len(tools)} tools, remember and recall answered")


def main() -> None:
    anyio.run(handshake, sys.argv[1], sys.argv[2:])


if __name__ == "__main__":
    main()
