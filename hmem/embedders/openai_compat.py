"""An embedder for any OpenAI-compatible ``/v1/embeddings`` endpoint (OpenAI, vLLM, Ollama,
llama.cpp, LiteLLM, ...), through the official ``openai`` client (``pip install 'hmem[openai]'``).

Configuration comes from the arguments, else from the environment:

``HMEM_BASE_URL``
    the API root, usually ending in ``/v1`` (e.g. ``http://localhost:11434/v1``);
``HMEM_API_KEY``
    the bearer key (any non-empty value for a local server that needs none);
``HMEM_EMBED_MODEL``
    the embedding model name, recorded with every vector;
``HMEM_EMBED_DIMS`` (optional)
    the expected vector length; without it the first response (or a probe) tells.

Retries are ours, not the client's (which is built with ``max_retries=0``). Each request is
tried up to ``max_attempts`` times when it fails with 408, 429 or 5xx, a connection error or a
timeout, sleeping ``backoff * 2**(attempt-1)`` seconds (capped at ``max_backoff``, "equal
jitter": half fixed, half random), or longer when the server's ``Retry-After`` asks (capped
too). Owning the loop means one retry policy whatever the ``openai`` version; the attempts,
the last status and the hint go into the :class:`EmbedderError`; and the clock (``sleep``) and
the jitter (``rng``) are injected, so tests count attempts at a fake server without waiting.
Any other 4xx (bad key, wrong URL or model) fails at once: retrying cannot fix it.
"""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from hmem.embedders.base import check_output, check_texts
from hmem.errors import EmbedderError, EmbedderUnavailable, InvalidInput
from hmem.http_failures import (
    RETRY_STATUSES,
    attempts,
    backoff_delay,
    failure_hint,
    server_detail,
)
from hmem.http_failures import retry_after as _retry_after

__all__ = ["OpenAIEmbedder", "RETRY_STATUSES"]

_HINTS: dict[int | str, str] = {
    404: "check HMEM_BASE_URL (OpenAI-compatible APIs usually end in /v1) and that the server "
         "has the model HMEM_EMBED_MODEL",
    400: "check that HMEM_EMBED_MODEL is an embedding model and the texts fit its limits",
    422: "check that HMEM_EMBED_MODEL is an embedding model and the texts fit its limits",
    429: "the server is rate limiting: retry later, or lower batch_size",
    "timeout": "check the server is up and not overloaded; raise timeout or lower batch_size",
    "connect": "check HMEM_BASE_URL and that the server is running and reachable",
    "dims": "check that HMEM_EMBED_DIMS (or dims=) is the length HMEM_EMBED_MODEL makes",
    "other": "check HMEM_BASE_URL, HMEM_API_KEY and HMEM_EMBED_MODEL",
}
_PROBE_TEXT = "dimension probe"
_INSTALL = "pip install 'hmem[openai]'"


class OpenAIEmbedder:
    """Embeds texts with a remote OpenAI-compatible model; see the module docstring.

    ``embed`` sends non-blank texts in batches of ``batch_size``, puts each returned vector at
    the row its ``index`` names, checks the count, the dims and the values of every response,
    and L2-normalises the rows; blank texts get all-zero rows without a request.
    """

    def __init__(
        self,
        model: str | None = None,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        dims: int | None = None,
        batch_size: int = 128,
        timeout: float = 30.0,
        max_attempts: int = 4,
        backoff: float = 0.5,
        max_backoff: float = 8.0,
        env: Mapping[str, str] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
    ) -> None:
        env = os.environ if env is None else env
        base_url = base_url or env.get("HMEM_BASE_URL")
        api_key = api_key or env.get("HMEM_API_KEY")
        model = model or env.get("HMEM_EMBED_MODEL")
        missing = [
            name
            for name, value in (
                ("HMEM_BASE_URL", base_url),
                ("HMEM_API_KEY", api_key),
                ("HMEM_EMBED_MODEL", model),
            )
            if not value
        ]
        if missing:
            raise EmbedderUnavailable(
                f"the OpenAI-compatible embedder is not configured: set {', '.join(missing)} "
                f"(or pass {', '.join(n.removeprefix('HMEM_').lower() for n in missing)}=...), "
                f"e.g. HMEM_BASE_URL=http://localhost:11434/v1 HMEM_API_KEY=none "
                f"HMEM_EMBED_MODEL=nomic-embed-text"
            )
        if dims is None and env.get("HMEM_EMBED_DIMS"):
            raw_dims = env["HMEM_EMBED_DIMS"]
            try:
                dims = int(raw_dims)
            except ValueError:
                dims = 0
            if dims < 1:
                raise EmbedderUnavailable(
                    f"HMEM_EMBED_DIMS must be a positive integer, got {raw_dims!r}; "
                    f"unset it to learn the dims from the model"
                )
        if dims is not None and dims < 1:
            raise InvalidInput(f"dims must be a positive integer, got {dims}")
        if batch_size < 1 or max_attempts < 1 or timeout <= 0 or backoff < 0 or max_backoff < 0:
            raise InvalidInput(
                "batch_size and max_attempts must be >= 1, timeout > 0, backoff and "
                "max_backoff >= 0"
            )
        try:
            import openai
        except ImportError as e:
            raise EmbedderUnavailable(
                f"the OpenAI-compatible embedder needs the openai package: {_INSTALL}"
            ) from e

        self.model: str = model  # type: ignore[assignment]  # checked above
        self.base_url: str = base_url  # type: ignore[assignment]
        self.batch_size = batch_size
        self.timeout = float(timeout)
        self.max_attempts = max_attempts
        self.backoff = float(backoff)
        self.max_backoff = float(max_backoff)
        self._dims = dims
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._openai = openai
        self._client = openai.OpenAI(
            base_url=base_url, api_key=api_key, timeout=self.timeout, max_retries=0
        )

    def __repr__(self) -> str:
        return (
            f"OpenAIEmbedder(model={self.model!r}, base_url={self.base_url!r}, "
            f"dims={self._dims})"
        )

    @property
    def dims(self) -> int:
        """The vector length: given, learned from the first response, or probed now."""
        if self._dims is None:
            self._embed_batch([_PROBE_TEXT])
        assert self._dims is not None
        return self._dims

    def close(self) -> None:
        """Close the HTTP client's connections."""
        self._client.close()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        texts = check_texts(texts)
        todo = [i for i, text in enumerate(texts) if text.strip()]
        batches: list[tuple[list[int], np.ndarray]] = []
        for start in range(0, len(todo), self.batch_size):
            rows = todo[start : start + self.batch_size]
            batches.append((rows, self._embed_batch([texts[i] for i in rows])))
        out = np.zeros((len(texts), self.dims), dtype=np.float32)
        for rows, vectors in batches:
            out[rows] = vectors
        return check_output(self, texts, out)

    # one batch ----------------------------------------------------------------------------------

    def _embed_batch(self, batch: list[str]) -> np.ndarray:
        """One request (with retries) -> validated, L2-normalised float32[len(batch), dims]."""
        vectors = self._parse(self._request(batch), len(batch))
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        np.divide(vectors, norms, out=vectors, where=norms > 0)
        return vectors.astype(np.float32)

    def _request(self, batch: list[str]) -> Any:
        """POST the batch, retrying as the module docstring says; returns the decoded JSON."""
        openai = self._openai
        for attempt in range(1, self.max_attempts + 1):
            retry_after = None
            try:
                raw = self._client.embeddings.with_raw_response.create(
                    model=self.model, input=batch, encoding_format="float", timeout=self.timeout
                )
                return self._decode(raw.http_response.content)
            except openai.APIStatusError as e:
                status = e.status_code
                failure, error, retry_after = f"HTTP {status}{server_detail(e)}", e, _retry_after(e)
                if status not in RETRY_STATUSES:
                    raise EmbedderError(self._failed(failure, status)) from e
            except openai.APITimeoutError as e:
                failure, error, status = f"no answer within {self.timeout:g} s", e, "timeout"
            except openai.APIConnectionError as e:
                failure, error, status = f"connection failed ({e.__cause__ or e})", e, "connect"
            except openai.OpenAIError as e:
                raise EmbedderError(self._failed(f"{type(e).__name__}: {e}", None)) from e
            if attempt < self.max_attempts:
                self._sleep(self._delay(attempt, retry_after))
        raise EmbedderError(
            self._failed(f"{failure} (after {attempts(self.max_attempts)})", status)
        ) from error

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        return backoff_delay(attempt, backoff=self.backoff, max_backoff=self.max_backoff,
                             rng=self._rng, retry_after=retry_after)

    def _failed(self, what: str, status: int | str | None) -> str:
        hint = failure_hint(status, _HINTS)
        return f"embedding with {self.model!r} at {self.base_url} failed: {what}; {hint}"

    # response checks ----------------------------------------------------------------------------

    def _decode(self, content: bytes) -> Any:
        try:
            return json.loads(content)
        except ValueError as e:
            raise EmbedderError(
                self._failed(f"the response is not JSON ({_snippet(content)!r})", "malformed")
            ) from e

    def _parse(self, payload: Any, n: int) -> np.ndarray:
        """Check the response and return float64[n, dims] in input order (by ``index``)."""

        def bad(what: str) -> EmbedderError:
            return EmbedderError(self._failed(f"malformed response: {what}", "malformed"))

        data = payload.get("data") if isinstance(payload, dict) else None
        if not isinstance(data, list):
            raise bad("no 'data' list")
        if len(data) != n:
            raise bad(f"{len(data)} vectors for {n} inputs")
        dims = self._dims
        out: np.ndarray | None = None
        seen: set[int] = set()
        for pos, item in enumerate(data):
            index = item.get("index") if isinstance(item, dict) else None
            if type(index) is not int or not 0 <= index < n or index in seen:
                raise bad(f"data[{pos}] has index {index!r}, expected a new integer in [0, {n})")
            seen.add(index)
            embedding = item.get("embedding")
            if not isinstance(embedding, list) or not all(
                type(x) in (int, float) for x in embedding
            ):
                raise bad(f"data[{pos}].embedding is not a list of numbers")
            if dims is None:
                dims = len(embedding)
                if dims == 0:
                    raise bad(f"data[{pos}].embedding is empty")
            if len(embedding) != dims:
                raise EmbedderError(
                    self._failed(f"a vector has {len(embedding)} dims, expected {dims}", "dims")
                )
            if out is None:
                out = np.empty((n, dims), dtype=np.float64)
            out[index] = embedding
        assert out is not None and dims is not None  # n >= 1: every batch has a text
        if not np.isfinite(out).all():
            raise bad("NaN or infinite values")
        self._dims = dims
        return out


def _snippet(content: bytes) -> str:
    return content[:80].decode("utf-8", "replace")
