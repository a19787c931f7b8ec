"""The MCP SDK at hmem's boundary: its server class, and a stdio transport that answers every
request.

The SDK's stdio reader parses each stdin line with pydantic's strict JSON parser and drops, with
no answer, a line it cannot read (a lone surrogate escape, a raw control character in a string,
bytes that are not UTF-8, nesting too deep): the client then waits forever. :class:`StdioServer`
reads stdin through :class:`_Wire`, which passes every readable line on unchanged and answers the
others itself (a tool error for a ``tools/call``, a JSON-RPC error otherwise).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any, cast

from hmem.adapters import cli_format as fmt

try:
    import anyio
    from mcp.server.stdio import stdio_server
    from mcp.shared.message import SessionMessage
    from mcp.types import (
        CallToolResult,
        JSONRPCMessage,
        JSONRPCNotification,
        TextContent,
        ToolAnnotations,
    )
    from pydantic import BeforeValidator, Field, TypeAdapter, ValidationError

    try:
        from mcp.server.mcpserver import MCPServer as Server  # mcp >= 2
        from mcp.server.mcpserver.exceptions import ToolError
    except ImportError:  # mcp 1.x
        from mcp.server.fastmcp import (  # type: ignore[no-redef,attr-defined,unused-ignore]
            FastMCP as Server,
        )
        from mcp.server.fastmcp.exceptions import (  # type: ignore[no-redef,unused-ignore]
            ToolError,
        )
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError(
        "`hmem mcp` needs the MCP SDK: pip install '.[mcp]' in hmem's checkout, or with uv: "
        f"uvx --from \"hmem[mcp] @ file://$PWD\" hmem mcp (importing it failed: {e})"
    ) from e

# The SDK names the server module builds its tools with, imported here behind the one check.
__all__ = [
    "BeforeValidator", "CallToolResult", "Field", "Server", "StdioServer", "TextContent",
    "ToolAnnotations", "error_result",
]


def _argument_problem(err: Any) -> str:
    """One validation error as a hint: the argument and what it needs, never its value."""
    where = ".".join(str(part) for part in err.get("loc", ())) or "arguments"
    if err.get("type") == "missing":
        return f"`{where}` is required"
    if err.get("type") == "string_too_long":  # the limit, and what to do
        limit = (err.get("ctx") or {}).get("max_length")
        return f"`{err['loc'][0]}` is longer than its limit of {limit} characters; shorten it"
    return f"`{where}`: {err.get('msg', 'invalid')}"


def _too_long_first(errors: list[Any]) -> list[Any]:
    """The validation errors, but for an argument too long only that one (not what each
    other type of a union, e.g. a seq or a time, says of it)."""
    too_long = {err["loc"][0] for err in errors
                if err.get("type") == "string_too_long" and err.get("loc")}
    return [err for err in errors if not err.get("loc") or err["loc"][0] not in too_long
            or err.get("type") == "string_too_long"]


def _tool_error(message: str) -> CallToolResult:
    return CallToolResult.model_validate(error_result("InvalidInput", message))


def error_result(kind: str, message: str) -> dict[str, Any]:
    """A tool error in its wire form: readable text plus ``{"error": kind, "message": ...}``."""
    message = fmt.unicode_safe(message)
    return {"content": [{"type": "text", "text": message}],
            "structuredContent": {"error": kind, "message": message}, "isError": True}


_MESSAGE: TypeAdapter[Any] = TypeAdapter(JSONRPCMessage)


def _screen(raw: bytes) -> tuple[str | None, dict[str, Any] | None, str | None]:
    """One line from the client: ``(line, None, None)`` when the SDK can read it, else ``(None,
    answer, tool)``: the answer the SDK would not give (none to a notification or a response)
    and the tool a refused call named. Only ``line`` reaches the server."""
    try:
        text, problem = raw.decode("utf-8"), ""
    except UnicodeDecodeError:
        text, problem = raw.decode("utf-8", "replace"), "the message is not valid UTF-8"
    if not text.strip():
        return None, None, None
    try:
        if not problem:
            read = _MESSAGE.validate_json(text)
            if not (isinstance(read, JSONRPCNotification) and _has_bad_id(text)):
                return text, None, None
            problem = "a request's id must be a string or an integer"  # not a notification
    except ValidationError as e:  # the SDK's reader drops such a line in silence
        problem = str(e.errors()[0]["msg"])[:300]
    try:
        msg = json.loads(text, strict=False)
    except (ValueError, RecursionError):
        msg = None
    if where := fmt.lone_surrogate_at(msg):
        problem = (f"{where} holds a lone surrogate (a \\ud800-\\udfff escape that is not half "
                   "of a pair), which is not text: send valid Unicode")
    request = isinstance(msg, dict) and isinstance(msg.get("method"), str)
    if isinstance(msg, dict) and ("id" not in msg if request else {"result", "error"} & msg.keys()):
        print(fmt.visible(f"hmem mcp: ignored a message the SDK cannot read: {problem}"),
              file=sys.stderr)
        return None, None, None  # a notification, or a response: nothing to answer
    rid = msg.get("id") if isinstance(msg, dict) else None
    params = msg.get("params") if request else None
    if isinstance(rid, bool) or not isinstance(rid, int | str) or fmt.lone_surrogate_at(rid):
        rid = None  # JSON-RPC: a null id when the request's own cannot be read
    elif request and msg["method"] == "tools/call" and isinstance(params, dict):
        result = error_result("InvalidInput", problem + "; nothing was done")  # as for a bad arg
        return None, {"jsonrpc": "2.0", "id": rid, "result": result}, str(params.get("name"))
    code, kind = (-32600, "Invalid Request") if msg is not None else (-32700, "Parse error")
    error = {"code": code, "message": fmt.unicode_safe(f"{kind}: {problem}")}
    return None, {"jsonrpc": "2.0", "id": rid, "error": error}, None


def _has_bad_id(text: str) -> bool:
    """Whether a message the SDK read as a notification carries an ``id`` (one it could not
    read: an object, a list, a number with a fraction, a bool or null): a request it would
    otherwise leave unanswered."""
    msg = json.loads(text, strict=False)
    return isinstance(msg, dict) and "id" in msg


class _Wire:
    """stdin for the SDK's stdio transport: a line the SDK could not read is answered here,
    through the transport's own writer, and never passed on."""

    def __init__(self, refused: Callable[[str], None]) -> None:
        self.refused, self.answers = refused, cast(Any, None)

    def __aiter__(self) -> _Wire:
        return self

    async def __anext__(self) -> str:
        while raw := await anyio.to_thread.run_sync(sys.stdin.buffer.readline):
            try:
                line, answer, tool = _screen(raw)
                if line is not None:
                    return line
                if tool is not None:
                    self.refused(tool)
                if answer is not None:
                    await self.answers.send(SessionMessage(_MESSAGE.validate_python(answer)))
            except Exception as e:  # a bug, or mcp 1.x and a null id: the session goes on
                print(f"hmem mcp: cannot answer a message: {e!s:.200}", file=sys.stderr)
        raise StopAsyncIteration


class StdioServer(Server):  # type: ignore[misc,valid-type,unused-ignore]
    """The SDK's server, reading stdin through a :class:`_Wire`. A call whose arguments break
    the tool's schema, or name an argument the tool does not take, is answered with a tool
    error that names each argument and what it needs (not the validator's text, which quotes
    the caller's values and a URL), and reported to :attr:`refused` like a refused line."""

    refused: Callable[[str], None] = staticmethod(lambda name: None)
    tool_arguments: dict[str, tuple[str, ...]] = {}  # tool -> the arguments it takes

    async def call_tool(self, name: str, arguments: dict[str, Any], *rest: Any) -> Any:
        takes = self.tool_arguments.get(name)
        unknown = sorted(set(arguments) - set(takes)) if takes is not None else []
        if unknown:
            self.refused(name)
            return _tool_error(
                f"{name} takes no argument {', '.join(map(repr, unknown))}; it takes "
                f"{', '.join(takes or ())}"
            )
        try:
            return await super().call_tool(name, arguments, *rest)
        except ToolError as e:
            if not isinstance(e.__cause__, ValidationError):
                raise
            self.refused(name)
            return _tool_error(f"{name}: " + "; ".join(
                _argument_problem(err) for err in _too_long_first(e.__cause__.errors())
            ))

    async def run_stdio_async(self) -> None:
        # the SDK's low-level server, which serves a pair of streams: mcp >= 2, or 1.x
        low: Any = getattr(self, "_lowlevel_server", None) or getattr(self, "_mcp_server", None)
        wire = _Wire(self.refused)
        async with stdio_server(cast(Any, wire)) as (read, write):
            wire.answers = write
            await low.run(read, write, low.create_initialization_options())
