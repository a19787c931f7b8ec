"""A small chat client for any OpenAI-compatible ``/v1/chat/completions`` endpoint (OpenAI,
vLLM, Ollama, llama.cpp, LiteLLM, ...), through the official ``openai`` package
(``pip install 'hmem[openai]'``), imported lazily.

Configuration (:meth:`LLMConfig.from_env`): ``HMEM_BASE_URL`` (the API root, usually ending in
``/v1``), ``HMEM_API_KEY`` (any value for a local server that needs none) and ``HMEM_LLM`` (the
chat model name).

Retries are ours: the ``openai`` client is built with ``max_retries=0``. A call that fails with
408, 429 or 5xx, a timeout or a connection error is retried up to ``max_retries`` times with
exponential backoff and "equal jitter" (``backoff * 2**(n-1)`` capped at ``max_backoff``, half
fixed, half random), or longer when the server's ``Retry-After`` asks (capped too). Other 4xx
fail at once. ``sleep`` and ``rng`` are injected so tests count attempts without waiting. Token
usage is read from each answer and summed in :attr:`LLMClient.usage`.
"""

from __future__ import annotations

import json
import random
import re
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import msgspec

from hmem.errors import LLMNotConfigured, LLMResponseInvalid, LLMUnavailable
from hmem.http_failures import (
    RETRY_STATUSES,
    attempts,
    backoff_delay,
    failure_hint,
    server_detail,
)
from hmem.http_failures import retry_after as _retry_after

__all__ = ["LLMConfig", "Usage", "ChatResult", "LLMClient", "RETRY_STATUSES", "strip_fences"]

T = TypeVar("T")

_HINTS: dict[int | str, str] = {
    404: "check HMEM_BASE_URL (usually ending in /v1) and that the server has HMEM_LLM",
    400: "check that HMEM_LLM is a chat model and the prompt fits its context",
    422: "check that HMEM_LLM is a chat model and the prompt fits its context",
    429: "the server is rate limiting: retry later",
    "timeout": "check the server is up and not overloaded; retry, or raise timeout_s",
    "connect": "check HMEM_BASE_URL and that the server is running, then retry",
    "other": "check HMEM_BASE_URL, HMEM_API_KEY and HMEM_LLM, then retry",
}
_INSTALL = "pip install 'hmem[openai]'"
_ENV_HINT = (
    "set HMEM_BASE_URL, HMEM_API_KEY and HMEM_LLM (e.g. HMEM_BASE_URL=http://localhost:11434/v1 "
    "HMEM_API_KEY=none HMEM_LLM=qwen2.5:7b-instruct)"
)


class LLMConfig(msgspec.Struct, frozen=True):
    """Where and how to call the chat model. ``max_retries`` counts retries after the first try."""

    model: str
    base_url: str | None = None
    api_key: str | None = None
    timeout_s: float = 60.0
    max_retries: int = 4

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> LLMConfig:
        """A config from ``HMEM_BASE_URL``, ``HMEM_API_KEY`` and ``HMEM_LLM``; keyword overrides
        win. Raises :class:`LLMNotConfigured` naming the variables when the model or the endpoint
        is missing."""
        import os

        env = os.environ if env is None else env
        values: dict[str, Any] = {
            "model": env.get("HMEM_LLM") or None,
            "base_url": env.get("HMEM_BASE_URL") or None,
            "api_key": env.get("HMEM_API_KEY") or None,
        }
        values.update({k: v for k, v in overrides.items() if v is not None})
        missing = [
            name
            for name, key in (("HMEM_LLM", "model"), ("HMEM_BASE_URL", "base_url"))
            if not values.get(key)
        ]
        if missing:
            raise LLMNotConfigured(
                f"no LLM is configured ({', '.join(missing)} not set): {_ENV_HINT}"
            )
        try:
            return cls(**values)
        except TypeError as e:
            raise LLMNotConfigured(f"bad LLM setting: {e}; {_ENV_HINT}") from e


class Usage(msgspec.Struct):
    """Tokens and calls; ``a + b`` sums them."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    calls: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.calls + other.calls,
        )

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class ChatResult(msgspec.Struct, frozen=True):
    """One answer: its text, the model the server names, this call's usage, wall latency."""

    text: str
    model: str
    usage: Usage
    latency_ms: float


class LLMClient:
    """Chat with an OpenAI-compatible model; see the module docstring.

    ``client`` may be a ready ``openai.OpenAI`` (its own retries should be off); otherwise one
    is built from ``config`` (default: :meth:`LLMConfig.from_env`).
    """

    def __init__(
        self,
        config: LLMConfig | None = None,
        *,
        client: Any = None,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
        backoff: float = 0.5,
        max_backoff: float = 8.0,
    ) -> None:
        self.config = config if config is not None else LLMConfig.from_env()
        if self.config.max_retries < 0 or self.config.timeout_s <= 0:
            raise LLMNotConfigured("max_retries must be >= 0 and timeout_s > 0")
        try:
            import openai
        except ImportError as e:
            raise LLMNotConfigured(f"the LLM client needs the openai package: {_INSTALL}") from e
        self._openai = openai
        if client is None:
            if not self.config.base_url:
                raise LLMNotConfigured(f"no LLM endpoint is configured: {_ENV_HINT}")
            client = openai.OpenAI(
                base_url=self.config.base_url,
                api_key=self.config.api_key or "none",
                timeout=self.config.timeout_s,
                max_retries=0,
            )
        self._client = client
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._backoff = float(backoff)
        self._max_backoff = float(max_backoff)
        self.usage = Usage()

    def __repr__(self) -> str:
        return f"LLMClient(model={self.config.model!r}, base_url={self.config.base_url!r})"

    def close(self) -> None:
        """Close the HTTP client's connections."""
        self._client.close()

    # one call -------------------------------------------------------------------------------

    def chat(
        self,
        messages: list[dict[str, str]],
        *,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        json_mode: bool = False,
    ) -> ChatResult:
        """One completion (with retries). Raises :class:`LLMUnavailable` when the endpoint
        fails, :class:`LLMResponseInvalid` when its answer is not a chat completion."""
        kwargs: dict[str, Any] = {
            "model": self.config.model,
            "messages": messages,
            "temperature": temperature,
            "timeout": self.config.timeout_s,
        }
        if max_tokens is not None:
            kwargs["max_tokens"] = max_tokens
        if json_mode:
            kwargs["response_format"] = {"type": "json_object"}
        start = time.perf_counter()
        payload = self._request(kwargs)
        latency_ms = (time.perf_counter() - start) * 1000.0
        text, model, usage = self._parse(payload)
        self.usage = self.usage + usage
        return ChatResult(text=text, model=model, usage=usage, latency_ms=latency_ms)

    def chat_json(
        self,
        messages: list[dict[str, str]],
        type_: type[T],
        *,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        attempts: int = 2,
    ) -> tuple[T, ChatResult]:
        """Ask for JSON and decode it as ``type_`` (msgspec). Code fences are stripped. An answer
        that does not decode is shown back to the model with the error, up to ``attempts`` asks
        in all; then :class:`LLMResponseInvalid` (with an excerpt of the last answer)."""
        if attempts < 1:
            raise LLMResponseInvalid("attempts must be >= 1")
        convo = list(messages)
        result: ChatResult | None = None
        error = ""
        for _ in range(attempts):
            result = self.chat(
                convo, temperature=temperature, max_tokens=max_tokens, json_mode=True
            )
            try:
                return msgspec.json.decode(strip_fences(result.text), type=type_), result
            except msgspec.DecodeError as e:
                error = str(e)
            convo = [
                *convo,
                {"role": "assistant", "content": result.text},
                {
                    "role": "user",
                    "content": f"That answer is not valid: {error}. Reply with only the JSON "
                    f"object, in the schema asked for, and nothing else.",
                },
            ]
        assert result is not None
        excerpt = result.text[:300]
        raise LLMResponseInvalid(
            f"{self.config.model!r} did not answer valid JSON after {attempts} "
            f"{'ask' if attempts == 1 else 'asks'} ({error}); answer began {excerpt!r}. Retry, "
            f"or use a model that follows JSON instructions better (HMEM_LLM)",
            raw=excerpt,
        )

    # transport ------------------------------------------------------------------------------

    def _request(self, kwargs: dict[str, Any]) -> Any:
        openai = self._openai
        tries = self.config.max_retries + 1
        for attempt in range(1, tries + 1):
            retry_after = None
            try:
                raw = self._client.chat.completions.with_raw_response.create(**kwargs)
                content = raw.http_response.content
            except openai.APIStatusError as e:
                status: int | str = e.status_code
                failure, error, retry_after = f"HTTP {status}{server_detail(e)}", e, _retry_after(e)
                if status not in RETRY_STATUSES:
                    raise LLMUnavailable(self._failed(failure, status)) from e
            except openai.APITimeoutError as e:
                failure, status = f"no answer within {self.config.timeout_s:g} s", "timeout"
                error = e
            except openai.APIConnectionError as e:
                failure, error, status = f"connection failed ({e.__cause__ or e})", e, "connect"
            except openai.OpenAIError as e:
                raise LLMUnavailable(self._failed(f"{type(e).__name__}: {e}", None)) from e
            else:
                try:
                    return json.loads(content)
                except ValueError as e:
                    raise LLMResponseInvalid(
                        self._failed(f"the response is not JSON ({content[:80]!r})", "malformed"),
                        raw=content[:300].decode("utf-8", "replace"),
                    ) from e
            if attempt < tries:
                self._sleep(self._delay(attempt, retry_after))
        raise LLMUnavailable(
            self._failed(f"{failure} (after {attempts(tries)})", status)
        ) from error

    def _parse(self, payload: Any) -> tuple[str, str, Usage]:
        try:
            message = payload["choices"][0]["message"]
            text = message.get("content") or ""
            if not isinstance(text, str):
                raise TypeError("content is not a string")
        except (KeyError, IndexError, TypeError, AttributeError) as e:
            raise LLMResponseInvalid(
                self._failed(f"not a chat completion ({e!r})", "malformed"),
                raw=json.dumps(payload)[:300],
            ) from e
        model = payload.get("model") or self.config.model
        raw_usage = payload.get("usage")
        if not isinstance(raw_usage, dict):  # missing, or a server that sends something odd
            raw_usage = {}
        usage = Usage(
            prompt_tokens=_int(raw_usage.get("prompt_tokens")),
            completion_tokens=_int(raw_usage.get("completion_tokens")),
            calls=1,
        )
        return text, str(model), usage

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        return backoff_delay(attempt, backoff=self._backoff, max_backoff=self._max_backoff,
                             rng=self._rng, retry_after=retry_after)

    def _failed(self, what: str, status: int | str | None) -> str:
        hint = failure_hint(status, _HINTS)
        return f"chat with {self.config.model!r} at {self.config.base_url} failed: {what}; {hint}"


_FENCE = re.compile(r"^\s*```[A-Za-z0-9_-]*\s*\n?(.*?)\n?\s*```\s*$", re.DOTALL)


def strip_fences(text: str) -> str:
    """The text without a surrounding Markdown code fence (```json ... ```), stripped."""
    match = _FENCE.match(text)
    return (match.group(1) if match else text).strip()


def _int(value: Any) -> int:
    return value if type(value) is int and value >= 0 else 0
