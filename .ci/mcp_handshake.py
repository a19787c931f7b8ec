"""CI: an MCP client (the SDK's own) starts an installed `hmem mcp` over stdio, completes the
handshake, lists the tools, remembers and recalls. Exits non-zero on any failure.

    python .ci/mcp_handshake.py /path/to/venv/bin/hmem STORE_DIR
"""

from __future__ import annotations

import sys

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


async def handshake(hmem: str, store: str) -> None:
    with anyio.fail_after(120):
        await _handshake(hmem, store)


async def _handshake(hmem: str, store: str) -> None:
    params = StdioServerParameters(command=hmem, args=["mcp", "--path", store],
                                   env={"HMEM_EMBEDDER": "none"})
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
    anyio.run(handshake, sys.argv[1], sys.argv[2])


if __name__ == "__main__":
    main()
