"""``hmem serve``: the MCP tools over the Streamable HTTP transport (the SDK's own), for agents
on other hosts and clients that speak only HTTP.

One process, one store and one derived state serve every client; each namespace it serves is
its own MCP endpoint over that state: ``/mcp`` (the first namespace) and ``/ns/<namespace>/mcp``
(the namespace percent-encoded).
The tools, their arguments and their errors are the stdio server's (:mod:`hmem.adapters.mcp_tools`).

Who may call: on a loopback address, anyone on this host (as with stdio, the store's files are
theirs anyway) unless a tokens file is given; on any other address a tokens file is required.
With one, every request carries ``Authorization: Bearer <token>`` and reaches only the
namespaces that token is bound to (401 without a known token, 403 for another namespace). The
file holds each token's SHA-256, never the token: :func:`new_token` makes one and its line.
Request bodies are limited (``max_body``), as are concurrent sessions (``max_sessions``).
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from hmem.adapters.mcp_tools import build_server
from hmem.adapters.usage import UsageLog
from hmem.args import check_namespace
from hmem.errors import InvalidInput
from hmem.memory import Memory

__all__ = ["Tokens", "http_app", "new_token", "MAX_BODY"]

MAX_BODY = 1 << 20  # bytes of one request: a 100,000-character text, JSON-escaped, fits
MAX_SESSIONS = 256


class Tokens:
    """The tokens file: one JSON object a line, ``{"name": ..., "sha256": <hex of the
    token's SHA-256>, "namespaces": [...]}``."""

    def __init__(self, entries: Sequence[dict[str, Any]]) -> None:
        self._by_digest: dict[str, tuple[str, ...]] = {}  # the name is for the file's reader
        for entry in entries:
            digest, names = entry.get("sha256"), entry.get("namespaces")
            if not (isinstance(digest, str) and len(digest) == 64 and isinstance(names, list)
                    and names and all(isinstance(n, str) for n in names)):
                raise InvalidInput(
                    f"a tokens file line needs sha256 (64 hex digits) and a non-empty list of "
                    f"namespaces: {json.dumps(entry)[:200]}"
                )
            self._by_digest[digest] = tuple(check_namespace(n) for n in names)

    @classmethod
    def read(cls, path: str | Path) -> Tokens:
        try:
            lines = Path(path).read_text(encoding="utf-8").splitlines()
        except OSError as e:
            raise InvalidInput(f"cannot read the tokens file {path}: {e.strerror}") from None
        try:
            return cls([json.loads(line) for line in lines if line.strip()])
        except ValueError as e:
            raise InvalidInput(f"the tokens file {path} is not JSON lines: {e}") from None

    def namespaces_of(self, token: str) -> tuple[str, ...] | None:
        """The namespaces ``token`` is bound to; None for a token the file does not hold."""
        # looked up by the token's SHA-256: what a lookup's timing could tell is of the hash,
        # which gives nothing of a token
        return self._by_digest.get(hashlib.sha256(token.encode()).hexdigest())

    @property
    def namespaces(self) -> list[str]:
        return list(dict.fromkeys(n for names in self._by_digest.values() for n in names))


def new_token(name: str, namespaces: Sequence[str]) -> tuple[str, str]:
    """A new random token and the tokens-file line that binds it to ``namespaces``."""
    token = "hmem_" + secrets.token_urlsafe(32)
    line = json.dumps({"name": name, "sha256": hashlib.sha256(token.encode()).hexdigest(),
                       "namespaces": [check_namespace(n) for n in namespaces]})
    return token, line


def http_app(
    memory: Memory,
    namespaces: Sequence[str],
    *,
    tokens: Tokens | None,
    host: str = "127.0.0.1",
    usage: UsageLog | None = None,
    source_agent: str = "mcp-http",
    max_body: int = MAX_BODY,
    max_sessions: int = MAX_SESSIONS,
) -> Any:
    """The ASGI app serving ``namespaces`` of ``memory`` (the first at ``/mcp``)."""
    from mcp.server.transport_security import TransportSecuritySettings
    from starlette.applications import Starlette

    if not namespaces:
        raise InvalidInput("name at least one namespace to serve")
    servers = {ns: build_server(memory.in_namespace(ns), usage=usage, source_agent=source_agent)
               for ns in dict.fromkeys(namespaces)}
    # the SDK's DNS-rebinding guard fits a loopback server; with tokens, the token guards
    security = None if tokens is None else TransportSecuritySettings(
        enable_dns_rebinding_protection=False)
    apps = {ns: server.streamable_http_app(
        streamable_http_path="/mcp", max_request_body_size=max_body, max_sessions=max_sessions,
        transport_security=security, host=host,
    ) for ns, server in servers.items()}

    @asynccontextmanager
    async def lifespan(_: Any) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            for server in servers.values():
                await stack.enter_async_context(server.session_manager.run())
            yield

    return _Guard(Starlette(lifespan=lifespan), apps, tokens)


class _Guard:
    """The ASGI app: checks the bearer token against the namespace the path names
    (``/ns/<percent-encoded namespace>/...``, else the first), then hands the request, its
    path without that prefix, to that namespace's MCP app. Lifespan events go to ``main``."""

    def __init__(self, main: Any, apps: dict[str, Any], tokens: Tokens | None) -> None:
        self.main, self.apps, self.tokens = main, apps, tokens
        self.first = next(iter(apps))

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.main(scope, receive, send)
            return
        raw: bytes = scope.get("raw_path") or scope.get("path", "").encode()
        wanted = self.first
        if raw.startswith(b"/ns/"):
            name, _, rest = raw[len(b"/ns/"):].partition(b"/")
            wanted = unquote(name.decode("latin-1"))
            scope = dict(scope, path="/" + unquote(rest.decode("latin-1")), raw_path=b"/" + rest)
            if wanted not in self.apps:
                await _refuse(send, 404, f"this server does not serve namespace {wanted!r}")
                return
        if self.tokens is not None:
            token = _bearer(scope)
            allowed = None if token is None else self.tokens.namespaces_of(token)
            if allowed is None:
                await _refuse(send, 401, "a bearer token this server knows is needed",
                              [(b"www-authenticate", b'Bearer realm="hmem"')])
                return
            if wanted not in allowed:
                await _refuse(send, 403, f"this token is not bound to namespace {wanted!r}")
                return
        await self.apps[wanted](scope, receive, send)


def _bearer(scope: dict[str, Any]) -> str | None:
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            kind, _, token = value.decode("latin-1").partition(" ")
            return token.strip() if kind.lower() == "bearer" and token.strip() else None
    return None


async def _refuse(
    send: Any, status: int, message: str, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    body = json.dumps({"error": message}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()), *(headers or [])]})
    await send({"type": "http.response.body", "body": body})
