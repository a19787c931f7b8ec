"""What the HTTP clients of the optional layers (embeddings, chat) share about failures: which
statuses are retried, how long to wait, the server's own message, and the hint for the user."""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from typing import Any

__all__ = [
    "RETRY_STATUSES",
    "attempts",
    "backoff_delay",
    "failure_hint",
    "retry_after",
    "server_detail",
]

RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504})

# Hints every client gives alike; each client adds its own (404, 400/422, 429, timeout, connect,
# and "other" for anything unknown). 5xx statuses share the "server" hint.
_SHARED_HINTS: dict[int | str, str] = {
    401: "check HMEM_API_KEY: the server rejected the key",
    403: "check HMEM_API_KEY: the server rejected the key",
    "malformed": "check that HMEM_BASE_URL is an OpenAI-compatible API (usually ending in /v1)",
    "server": "the server failed: check its logs, retry later",
}


def failure_hint(status: int | str | None, hints: Mapping[int | str, str]) -> str:
    """What the user should check after a failure with ``status`` (an HTTP status, or a word
    such as "timeout", "connect", "malformed"): the client's own hint, else the shared one."""
    keys: list[int | str] = [] if status is None else [status]
    if isinstance(status, int) and status >= 500:
        keys.append("server")
    for key in keys:
        for table in (hints, _SHARED_HINTS):
            if key in table:
                return table[key]
    return hints["other"]


def server_detail(error: Any) -> str:
    """The server's own error message of an ``openai`` API error, short, in parentheses."""
    body = error.body
    message = body.get("message") if isinstance(body, dict) else body
    if not message:
        message = error.response.content[:80].decode("utf-8", "replace")
    return f" ({str(message)[:200]})" if message else ""


def attempts(n: int) -> str:
    """'1 attempt', '3 attempts'."""
    return f"{n} attempt" if n == 1 else f"{n} attempts"


def backoff_delay(
    attempt: int, *, backoff: float, max_backoff: float, rng: random.Random,
    retry_after: float | None = None,
) -> float:
    """Seconds to wait before retry ``attempt`` (1-based): exponential backoff with equal jitter
    (``backoff * 2**(attempt-1)`` capped at ``max_backoff``, half fixed, half random), or the
    server's ``Retry-After`` when that is longer (capped too)."""
    cap = min(max_backoff, backoff * 2 ** (attempt - 1))
    delay: float = cap / 2 + rng.uniform(0, cap / 2)
    if retry_after is not None:
        delay = max(delay, min(retry_after, max_backoff))
    return delay


def retry_after(error: Any) -> float | None:
    """Seconds from an ``openai`` API error's ``retry-after-ms`` or ``retry-after`` header
    (seconds form only), or None."""
    headers = error.response.headers
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        try:
            value = float(headers.get(name, ""))
        except ValueError:
            continue
        if math.isfinite(value) and value >= 0:
            return value / scale
    return None
