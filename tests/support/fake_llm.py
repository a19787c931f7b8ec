"""Chat-completion replies and handlers for :class:`tests.support.fake_openai.FakeOpenAI`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.support.fake_openai import CHAT, Reply, Request

__all__ = ["CHAT", "chat_reply", "chat_handler", "fixed_chat"]


def chat_reply(
    text: str, *, model: str = "fake-chat", prompt_tokens: int = 11, completion_tokens: int = 7
) -> Reply:
    """A 200 chat completion whose one choice says ``text``."""
    return Reply.json(
        {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": 0,
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }
    )


def chat_handler(answer: Callable[[list[dict[str, Any]]], str], **kwargs: Any):
    """A handler answering each request with ``answer(messages)``."""

    def handle(request: Request) -> Reply:
        body = request.json
        if not isinstance(body, dict) or "messages" not in body:
            return Reply.error(400, "expected 'messages'", type="invalid_request_error")
        return chat_reply(answer(body["messages"]), **kwargs)

    return handle


def fixed_chat(text: str, **kwargs: Any):
    """A handler that always answers ``text``."""
    return chat_handler(lambda _messages: text, **kwargs)
