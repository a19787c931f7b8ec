"""Shared pieces of the extraction tests (tests/llm/test_extract*.py): a settable clock, the JSON
the fake extractor model answers, and the ``server``/``extractor``/``mem`` fixtures.

A test module imports the fixtures it uses (``server_fixture``...); pytest registers each under
its ``name`` (``server``...), so a test's parameter does not shadow the imported name."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

import pytest

from hmem import Memory
from hmem.llm import LLMClient, LLMConfig
from hmem.llm.extractor import LLMExtractor
from tests.support.fake_llm import CHAT, chat_reply
from tests.support.fake_openai import FakeOpenAI

__all__ = [
    "T0",
    "Clock",
    "extractor_fixture",
    "fact",
    "fact_events",
    "facts",
    "mem_fixture",
    "say",
    "server_fixture",
]

T0 = datetime(2026, 3, 1, 12, tzinfo=timezone.utc)


class Clock:
    """A transaction-time clock the test moves by setting ``now``."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


def facts(*items: dict) -> str:
    """The extractor model's answer: ``{"facts": [...]}``."""
    return json.dumps({"facts": list(items)})


def fact(text: str, subject: str = "Maya", **extra) -> dict:
    return {"text": text, "subject": subject, **extra}


def say(server: FakeOpenAI, *texts: str) -> None:
    """Script the next extractor answers."""
    server.script(CHAT, *(chat_reply(t, model="fake-extractor") for t in texts))


def fact_events(m: Memory) -> list[tuple]:
    return m.sql(
        "SELECT seq, type FROM events WHERE type IN ('remembered', 'revised', 'forgotten') "
        "ORDER BY seq"
    ).fetchall()


@pytest.fixture(name="server")
def server_fixture() -> Iterator[FakeOpenAI]:
    """A fake model that answers no facts unless a test scripts (``say``) or routes otherwise."""
    with FakeOpenAI() as srv:
        srv.route(CHAT, lambda request: chat_reply(facts(), model="fake-extractor"))
        yield srv


@pytest.fixture(name="extractor")
def extractor_fixture(server: FakeOpenAI) -> Iterator[LLMExtractor]:
    client = LLMClient(
        LLMConfig("fake-extractor", server.base_url, "sk-test", timeout_s=10, max_retries=2),
        sleep=lambda s: None,
    )
    yield LLMExtractor(client)
    client.close()


@pytest.fixture(name="mem")
def mem_fixture(tmp_path: Path) -> Iterator[Memory]:
    with Memory(tmp_path / "store", clock=Clock(), embedder=None, fsync="never") as m:
        yield m
