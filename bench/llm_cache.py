"""An on-disk cache in front of a chat client: reruns of a benchmark are free and reproducible.

:class:`CachedLLM` has the client's ``chat()`` signature. The key is the SHA-256 of the
canonical JSON of ``{model, messages, temperature, max_tokens, json_mode}`` plus a cache format
version; a hit returns the stored answer, its usage and its original latency, so a rerun prints
the same report without one HTTP request. One JSON file per call, ``<dir>/<ab>/<key>.json``,
written to a temporary file and renamed into place (a crash never leaves half an entry; two
threads storing the same key both write whole files). Each entry keeps its request, so the
cache doubles as a log of every prompt a run sent.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
from pathlib import Path
from typing import Any, Protocol, TypeVar

import msgspec

from hmem.errors import LLMResponseInvalid
from hmem.llm import ChatResult, Usage, strip_fences

__all__ = ["CachedLLM", "ChatClient", "cache_key"]

T = TypeVar("T")
FORMAT = 1


class ChatClient(Protocol):
    def chat(
        self, messages: list[dict[str, str]], *, temperature: float = 0.0,
        max_tokens: int | None = None, json_mode: bool = False,
    ) -> ChatResult: ...


def cache_key(
    model: str, messages: list[dict[str, str]], *, temperature: float,
    max_tokens: int | None, json_mode: bool,
) -> str:
    """The hex SHA-256 naming one request."""
    request = _request(model, messages, temperature, max_tokens, json_mode)
    blob = json.dumps(request, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()


def _request(
    model: str, messages: list[dict[str, str]], temperature: float, max_tokens: int | None,
    json_mode: bool,
) -> dict[str, Any]:
    return {
        "format": FORMAT, "model": model, "messages": [dict(m) for m in messages],
        "temperature": float(temperature), "max_tokens": max_tokens, "json_mode": bool(json_mode),
    }


class CachedLLM:
    """``client`` behind a cache directory. ``model`` is part of the key (default: the client's
    ``config.model``). ``offline=True`` refuses to call the client: a miss raises ``KeyError``.

    Counters (thread-safe): ``hits``, ``misses``, ``usage`` (every answer returned, cached or
    not) and ``fresh_usage`` (only the calls really made).
    """

    def __init__(
        self, client: ChatClient | None, cache_dir: str | os.PathLike[str], *,
        model: str | None = None, offline: bool = False,
    ) -> None:
        if model is None:
            model = getattr(getattr(client, "config", None), "model", None)
        if not model:
            raise ValueError("CachedLLM needs the model name (it is part of every cache key)")
        self.client = client
        self.model = model
        self.dir = Path(cache_dir)
        self.offline = offline or client is None
        self.hits = 0
        self.misses = 0
        self.usage = Usage()
        self.fresh_usage = Usage()
        self._lock = threading.Lock()

    def path(self, key: str) -> Path:
        return self.dir / key[:2] / f"{key}.json"

    def cached(
        self, messages: list[dict[str, str]], *, temperature: float = 0.0,
        max_tokens: int | None = None, json_mode: bool = False,
    ) -> bool:
        """Whether this exact request is in the cache (nothing is called)."""
        key = cache_key(self.model, messages, temperature=temperature, max_tokens=max_tokens,
                        json_mode=json_mode)
        return self.path(key).exists()

    def chat(
        self, messages: list[dict[str, str]], *, temperature: float = 0.0,
        max_tokens: int | None = None, json_mode: bool = False,
    ) -> ChatResult:
        """The client's answer to this request, from the cache when it was asked before."""
        key = cache_key(self.model, messages, temperature=temperature, max_tokens=max_tokens,
                        json_mode=json_mode)
        path = self.path(key)
        result = self._load(path)
        if result is not None:
            with self._lock:
                self.hits += 1
                self.usage = self.usage + result.usage
            return result
        if self.offline:
            raise KeyError(f"not in the LLM cache (offline): {key}")
        assert self.client is not None
        result = self.client.chat(messages, temperature=temperature, max_tokens=max_tokens,
                                  json_mode=json_mode)
        entry = {
            "key": key,
            "request": _request(self.model, messages, temperature, max_tokens, json_mode),
            "result": msgspec.to_builtins(result),
        }
        _write_atomic(path, json.dumps(entry, ensure_ascii=False, indent=1).encode())
        with self._lock:
            self.misses += 1
            self.usage = self.usage + result.usage
            self.fresh_usage = self.fresh_usage + result.usage
        return result

    def chat_json(
        self, messages: list[dict[str, str]], type_: type[T], *, temperature: float = 0.0,
        max_tokens: int | None = None, attempts: int = 2,
    ) -> tuple[T, ChatResult]:
        """Ask for JSON and decode it as ``type_`` (msgspec, strict). An answer that does not
        decode is shown back with the error (each ask is cached, so a rerun takes the same
        path). Returns the value and the last answer with the usage of all asks summed; raises
        :class:`LLMResponseInvalid` after ``attempts`` asks."""
        convo = list(messages)
        usage, latency, error, result = Usage(), 0.0, "", None
        for _ in range(max(1, attempts)):
            result = self.chat(convo, temperature=temperature, max_tokens=max_tokens,
                               json_mode=True)
            usage, latency = usage + result.usage, latency + result.latency_ms
            try:
                value = msgspec.json.decode(strip_fences(result.text), type=type_)
            except msgspec.DecodeError as e:  # ValidationError is a DecodeError
                error = str(e)
            else:
                return value, ChatResult(result.text, result.model, usage, latency)
            convo = [
                *convo,
                {"role": "assistant", "content": result.text},
                {"role": "user", "content": f"That is not valid: {error}. Reply with only the "
                                            f"JSON object asked for, nothing else."},
            ]
        assert result is not None
        raise LLMResponseInvalid(
            f"{self.model!r} did not answer valid JSON after {attempts} asks ({error}); "
            f"answer began {result.text[:200]!r}", raw=result.text[:300],
        )

    def _load(self, path: Path) -> ChatResult | None:
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return None
        try:
            return msgspec.convert(json.loads(raw)["result"], ChatResult)
        except (ValueError, KeyError, TypeError, msgspec.ValidationError):
            return None  # unreadable entry: ask again and overwrite it


def _write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
