"""LLMClient through the real ``openai`` client against the fake server on 127.0.0.1 (no
network; backoff sleeps are injected and recorded, the timeout test uses a 0.2 s timeout)."""

from __future__ import annotations

import random
import subprocess
import sys

import msgspec
import pytest

from hmem.errors import HmemError, LLMNotConfigured, LLMResponseInvalid, LLMUnavailable
from hmem.llm import ChatResult, LLMClient, LLMConfig, Usage, strip_fences
from tests.support.fake_llm import CHAT, chat_reply, fixed_chat
from tests.support.fake_openai import FakeOpenAI, Reply

MODEL = "fake-chat"
ANSWER = '{"answer": "yes", "n": 2}'  # what the server's route answers
HI = [{"role": "user", "content": "hi"}]


class Answer(msgspec.Struct):
    answer: str
    n: int


@pytest.fixture
def server():
    with FakeOpenAI() as srv:
        srv.route(CHAT, fixed_chat(ANSWER))
        yield srv


@pytest.fixture
def sleeps() -> list[float]:
    return []


@pytest.fixture
def make(server, sleeps):
    pytest.importorskip("openai")
    made: list[LLMClient] = []

    def build(**kwargs) -> LLMClient:
        config = LLMConfig(
            model=MODEL,
            base_url=server.base_url,
            api_key="sk-test",
            timeout_s=kwargs.pop("timeout_s", 10.0),
            max_retries=kwargs.pop("max_retries", 4),
        )
        client = LLMClient(config, sleep=sleeps.append, rng=random.Random(0), **kwargs)
        made.append(client)
        return client

    yield build
    for client in made:
        client.close()


def test_chat_sends_the_request_and_counts_tokens(make, server):
    llm = make()
    out = llm.chat(HI, temperature=0.3, max_tokens=50)
    assert isinstance(out, ChatResult)
    assert out.text == ANSWER and out.model == MODEL
    assert out.usage == Usage(prompt_tokens=11, completion_tokens=7, calls=1)
    assert out.usage.total_tokens == 18
    assert isinstance(out.latency_ms, float) and 0 <= out.latency_ms < 10_000
    (request,) = server.requests_to(CHAT)
    assert (request.method, request.path) == ("POST", CHAT)
    assert request.json == {"model": MODEL, "messages": HI, "temperature": 0.3, "max_tokens": 50}
    assert request.headers["authorization"] == "Bearer sk-test"
    again = llm.chat([{"role": "user", "content": "again"}], json_mode=True)
    assert again.text == ANSWER and again.usage == Usage(11, 7, 1)
    assert server.requests_to(CHAT)[-1].json == {
        "model": MODEL,
        "messages": [{"role": "user", "content": "again"}],
        "temperature": 0.0,
        "response_format": {"type": "json_object"},
    }
    assert llm.usage == Usage(prompt_tokens=22, completion_tokens=14, calls=2)


def test_usage_adds():
    total = Usage(1, 2, 1) + Usage(10, 20, 2)
    assert total == Usage(11, 22, 3) and total.total_tokens == 33
    assert Usage() == Usage(0, 0, 0) and Usage() + Usage() == Usage()


def first_backoff(seconds: float) -> bool:
    """Within the first retry's equal jitter (backoff 0.5 s: 0.25 to 0.5 s)."""
    return 0.25 <= seconds <= 0.5


def second_backoff(seconds: float) -> bool:
    return 0.5 <= seconds <= 1.0


def test_429_then_success_retries_with_backoff(make, server, sleeps):
    server.script(CHAT, Reply.error(429, "slow down"), Reply.error(503))
    llm = make()
    out = llm.chat(HI)
    assert out.text == ANSWER and out.usage == Usage(11, 7, 1)
    bodies = [r.json for r in server.requests_to(CHAT)]
    assert bodies == [{"model": MODEL, "messages": HI, "temperature": 0.0}] * 3  # the same ask
    assert len(sleeps) == 2 and first_backoff(sleeps[0]) and second_backoff(sleeps[1])
    assert llm.usage == Usage(11, 7, 1)  # failed attempts cost no tokens


def test_retry_after_header_is_honoured_but_capped(make, server, sleeps):
    server.script(
        CHAT, Reply.error(429, **{"Retry-After": "3"}), Reply.error(429, **{"retry-after": "999"})
    )
    out = make().chat(HI)
    assert out.text == ANSWER
    assert sleeps == [3.0, 8.0]  # as asked, then capped at max_backoff
    assert len(server.requests_to(CHAT)) == 3


def test_500s_until_exhausted_raise_unavailable(make, server, sleeps):
    server.route(CHAT, lambda request: Reply.error(500, "boom"))
    llm = make(max_retries=2)
    match = r"HTTP 500 \(boom\) \(after 3 attempts\).*retry"
    with pytest.raises(LLMUnavailable, match=match) as info:
        llm.chat(HI)
    assert isinstance(info.value, HmemError)
    assert str(info.value).startswith(f"chat with {MODEL!r} at {server.base_url} failed: ")
    assert str(info.value).endswith("the server failed: check its logs, retry later")
    assert len(server.requests_to(CHAT)) == 3
    assert len(sleeps) == 2 and first_backoff(sleeps[0]) and second_backoff(sleeps[1])
    assert llm.usage == Usage()


def test_client_errors_are_not_retried(make, server, sleeps):
    server.script(CHAT, Reply.error(401, "bad key", type="invalid_request_error"))
    llm = make()
    with pytest.raises(LLMUnavailable, match="HMEM_API_KEY") as info:
        llm.chat(HI)
    assert "failed: HTTP 401 (bad key); check HMEM_API_KEY" in str(info.value)
    assert "attempts" not in str(info.value)
    assert len(server.requests_to(CHAT)) == 1 and sleeps == []
    assert llm.usage == Usage()


def test_timeout_is_retried_then_reported(make, server, sleeps):
    server.script(CHAT, Reply.hang(), Reply.hang())
    with pytest.raises(LLMUnavailable, match=r"no answer within 0.2 s \(after 2 attempts\)"):
        make(timeout_s=0.2, max_retries=1).chat(HI)
    assert len(sleeps) == 1 and first_backoff(sleeps[0])
    assert [r.json["messages"] for r in server.requests_to(CHAT)] == [HI, HI]


def test_connection_error_then_success(make, server, sleeps):
    server.script(CHAT, Reply.disconnect())
    llm = make()
    out = llm.chat(HI)
    assert out.text == ANSWER and out.model == MODEL
    assert len(server.requests_to(CHAT)) == 2
    assert len(sleeps) == 1 and first_backoff(sleeps[0])
    assert llm.usage == Usage(11, 7, 1)


def test_non_json_body_is_invalid_response(make, server, sleeps):
    server.script(CHAT, Reply.raw(b"<html>gateway</html>"))
    llm = make()
    with pytest.raises(LLMResponseInvalid, match="not JSON") as info:
        llm.chat(HI)
    assert info.value.raw == "<html>gateway</html>"
    assert "check that HMEM_BASE_URL is an OpenAI-compatible API" in str(info.value)
    assert len(server.requests_to(CHAT)) == 1 and sleeps == []  # not retried
    assert llm.usage == Usage()


def test_chat_json_decodes_and_strips_fences(make, server):
    fenced = '```json\n{"answer": "fenced", "n": 1}\n```'
    server.script(CHAT, chat_reply(fenced))
    value, result = make().chat_json([{"role": "user", "content": "json please"}], Answer)
    assert value == Answer("fenced", 1)
    assert result.text == fenced and result.usage == Usage(11, 7, 1)
    (request,) = server.requests_to(CHAT)
    assert request.json["response_format"] == {"type": "json_object"}
    assert request.json["messages"] == [{"role": "user", "content": "json please"}]


def test_chat_json_reasks_once_with_the_error(make, server):
    server.script(CHAT, chat_reply("sure! here it is: {answer: yes}"))
    llm = make()
    ask = {"role": "user", "content": "json"}
    value, result = llm.chat_json([ask], Answer)
    assert value == Answer("yes", 2)
    assert result.text == ANSWER and result.usage == Usage(11, 7, 1)  # the last call's
    first, second = (r.json["messages"] for r in server.requests_to(CHAT))
    assert first == [ask]
    assert second[:2] == [ask, {"role": "assistant", "content": "sure! here it is: {answer: yes}"}]
    assert len(second) == 3 and second[2]["role"] == "user"
    assert second[2]["content"].startswith("That answer is not valid: JSON is malformed")
    assert second[2]["content"].endswith("Reply with only the JSON object, in the schema asked "
                                         "for, and nothing else.")
    assert llm.usage == Usage(prompt_tokens=22, completion_tokens=14, calls=2)


def test_chat_json_invalid_after_attempts_raises_with_excerpt(make, server):
    server.route(CHAT, fixed_chat('{"answer": 5}'))  # valid JSON, wrong schema
    llm = make()
    with pytest.raises(LLMResponseInvalid, match=r"after 3 asks") as info:
        llm.chat_json([{"role": "user", "content": "json"}], Answer, attempts=3)
    assert info.value.raw == '{"answer": 5}'
    assert "Expected `str`, got `int`" in str(info.value)
    assert f"{MODEL!r} did not answer valid JSON after 3 asks" in str(info.value)
    # each re-ask carries the conversation so far: the answer and the error, two more messages
    assert [len(r.json["messages"]) for r in server.requests_to(CHAT)] == [1, 3, 5]
    assert llm.usage == Usage(prompt_tokens=33, completion_tokens=21, calls=3)


def test_strip_fences():
    assert strip_fences('```json\n{"a": 1}\n```') == '{"a": 1}'
    assert strip_fences('```\n[1]\n```\n') == "[1]"
    assert strip_fences('  {"a": 1} ') == '{"a": 1}'


def test_not_configured_names_the_three_variables():
    with pytest.raises(LLMNotConfigured) as info:
        LLMConfig.from_env(env={})
    assert "(HMEM_LLM, HMEM_BASE_URL not set)" in str(info.value)
    for name in ("HMEM_BASE_URL", "HMEM_API_KEY", "HMEM_LLM"):
        assert name in str(info.value)
    config = LLMConfig.from_env(
        env={"HMEM_BASE_URL": "http://127.0.0.1:1/v1", "HMEM_LLM": "m", "HMEM_API_KEY": "k"},
        timeout_s=5.0,
    )
    assert config == LLMConfig("m", "http://127.0.0.1:1/v1", "k", 5.0, 4)
    assert LLMConfig.from_env(env={"HMEM_BASE_URL": "u"}, model="x") == LLMConfig("x", "u")


def test_missing_openai_package_names_the_install_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "openai", None)
    with pytest.raises(LLMNotConfigured, match=r"pip install 'hmem\[openai\]'"):
        LLMClient(LLMConfig("m", "http://127.0.0.1:1/v1"))


def test_importing_the_llm_package_does_not_import_openai():
    code = "import sys, hmem.llm, hmem.llm.extraction; assert 'openai' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_storage_core_does_not_import_the_llm_layer():
    code = (
        "import sys, eventlog, projections.projector, replay, hmem.memory, hmem.storage.store\n"
        "from hmem import Memory\n"
        "bad = [m for m in sys.modules if m in ('openai', 'hmem.llm', 'hmem.llm.extraction')]\n"
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
