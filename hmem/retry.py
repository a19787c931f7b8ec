"""Retry timing shared by the HTTP clients of the optional layers (embeddings, chat)."""

from __future__ import annotations

import math
import random
from typing import Any

__all__ = ["backoff_delay", "retry_after"]


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
