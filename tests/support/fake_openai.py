"""A fake OpenAI-compatible HTTP server for offline tests (standard library only).

It listens on 127.0.0.1 on an ephemeral port, records every request, and answers each route
from a per-route script of one-shot replies first, then from the route's handler::

    with FakeOpenAI() as server:
        server.route(EMBEDDINGS, embeddings_handler(dims=8))
        server.script(EMBEDDINGS, Reply.error(429), Reply.error(500))  # the next two requests
        client = openai.OpenAI(base_url=server.base_url, api_key="sk-test")
        ...
        assert [r.json["input"] for r in server.requests_to(EMBEDDINGS)] == ...

A :class:`Reply` is a status, a body (JSON-able value, or raw bytes for malformed responses),
headers, an optional ``delay`` before answering (for client timeouts; released at once when the
server stops, so no test waits it out) and ``drop`` (close the connection without answering).
A handler is any ``Callable[[Request], Reply]``; a route without one answers 404 in OpenAI's
error shape. New routes (chat completions, models) need only a handler.
"""

from __future__ import annotations

import hashlib
import json
import random
import threading
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = [
    "CHAT",
    "EMBEDDINGS",
    "FakeOpenAI",
    "Handler",
    "Reply",
    "Request",
    "embeddings_handler",
    "fake_vector",
]

EMBEDDINGS = "/v1/embeddings"
CHAT = "/v1/chat/completions"


@dataclass(frozen=True)
class Request:
    """One request as the server received it (header names lower-cased)."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        """The body parsed as JSON, or None when it is empty or not JSON."""
        try:
            return json.loads(self.body) if self.body else None
        except ValueError:
            return None


@dataclass(frozen=True)
class Reply:
    """What the server answers. ``body`` is JSON-encoded unless it is bytes (sent as is)."""

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    drop: bool = False

    @classmethod
    def json(cls, body: Any, status: int = 200, **headers: str) -> Reply:
        return cls(status=status, body=body, headers=headers)

    @classmethod
    def error(
        cls, status: int, message: str = "", *, type: str = "server_error", **headers: str
    ) -> Reply:
        """An error in OpenAI's shape: ``{"error": {"message", "type", "code"}}``."""
        body = {"error": {"message": message or f"fake error {status}", "type": type, "code": None}}
        return cls(status=status, body=body, headers=headers)

    @classmethod
    def raw(cls, body: bytes, status: int = 200, content_type: str = "application/json") -> Reply:
        """Bytes sent verbatim (malformed JSON, HTML error pages)."""
        return cls(status=status, body=body, headers={"Content-Type": content_type})

    @classmethod
    def hang(cls, seconds: float = 30.0) -> Reply:
        """Answer nothing for ``seconds`` (longer than the client's timeout), then 200 {}."""
        return cls(body={}, delay=seconds)

    @classmethod
    def disconnect(cls) -> Reply:
        """Close the connection without an answer (a connection error for the client)."""
        return cls(drop=True)


Handler = Callable[[Request], Reply]


class FakeOpenAI:
    """The server. Use as a context manager, or call :meth:`start` and :meth:`stop`."""

    def __init__(self) -> None:
        self.requests: list[Request] = []
        self._handlers: dict[str, Handler] = {}
        self._scripts: dict[str, deque[Reply]] = defaultdict(deque)
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # configuration --------------------------------------------------------------------------

    def route(self, path: str, handler: Handler) -> None:
        """Answer requests to ``path`` (e.g. ``/v1/embeddings``) with ``handler``."""
        with self._lock:
            self._handlers[path] = handler

    def script(self, path: str, *replies: Reply) -> None:
        """Queue one-shot replies for the next requests to ``path``, before its handler."""
        with self._lock:
            self._scripts[path].extend(replies)

    def unscript(self, path: str) -> int:
        """Drop the replies still queued for ``path``; returns how many there were."""
        with self._lock:
            left = len(self._scripts[path])
            self._scripts[path].clear()
            return left

    def requests_to(self, path: str) -> list[Request]:
        with self._lock:
            return [r for r in self.requests if r.path == path]

    @property
    def base_url(self) -> str:
        """The URL to give an OpenAI client, ending in ``/v1``."""
        if self._httpd is None:
            raise RuntimeError("the fake server is not started")
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    # lifecycle ------------------------------------------------------------------------------

    def start(self) -> FakeOpenAI:
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_class(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # wakes handlers waiting out a delay
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # serving --------------------------------------------------------------------------------

    def _answer(self, request: Request) -> Reply:
        with self._lock:
            self.requests.append(request)
            script = self._scripts.get(request.path)
            if script:
                return script.popleft()
            handler = self._handlers.get(request.path)
        if handler is None:
            return Reply.error(404, f"no route {request.path}", type="invalid_request_error")
        return handler(request)


def _handler_class(server: FakeOpenAI) -> type[BaseHTTPRequestHandler]:
    class _Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"  # one request per connection: simple and deterministic

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            request = Request(
                method=self.command,
                path=self.path.split("?", 1)[0],
                headers={k.lower(): v for k, v in self.headers.items()},
                body=self.rfile.read(length) if length else b"",
            )
            reply = server._answer(request)
            if reply.delay and server._stopping.wait(reply.delay):
                return  # the server is stopping: give up on this (already timed-out) request
            if reply.drop:
                self.close_connection = True
                return
            body = reply.body if isinstance(reply.body, bytes) else json.dumps(reply.body).encode()
            try:
                self.send_response(reply.status)
                headers = {"Content-Type": "application/json", **reply.headers}
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (timed out) first

        do_GET = do_POST = do_PUT = do_DELETE = _serve

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass  # requests are recorded, not printed

    return _Handler


# the embeddings route ---------------------------------------------------------------------------


def fake_vector(text: str, dims: int) -> list[float]:
    """A deterministic, deliberately unnormalised vector for ``text``."""
    seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")
    rng = random.Random(seed)
    return [rng.uniform(-3.0, 3.0) for _ in range(dims)]


def embeddings_handler(
    dims: int = 8, *, shuffle: bool = False, model: str | None = None
) -> Handler:
    """``POST /v1/embeddings``: one :func:`fake_vector` per input, each item with its ``index``.

    ``shuffle`` returns the items in a (seeded) shuffled order, as servers may."""

    def handle(request: Request) -> Reply:
        body = request.json
        if not isinstance(body, dict) or "input" not in body:
            return Reply.error(
                400, "expected a JSON body with 'input'", type="invalid_request_error"
            )
        inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
        items = [
            {"object": "embedding", "index": i, "embedding": fake_vector(str(text), dims)}
            for i, text in enumerate(inputs)
        ]
        if shuffle:
            random.Random(len(items)).shuffle(items)
            if len(items) > 1 and [it["index"] for it in items] == list(range(len(items))):
                items.reverse()  # make sure the order really differs
        return Reply.json(
            {
                "object": "list",
                "data": items,
                "model": model or body.get("model", "fake-embed"),
                "usage": {"prompt_tokens": len(inputs), "total_tokens": len(inputs)},
            }
        )

    return handle

