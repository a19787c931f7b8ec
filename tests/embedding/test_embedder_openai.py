"""OpenAIEmbedder against a fake OpenAI-compatible server on 127.0.0.1 (no network, no sleeps:
the backoff clock is injected and recorded; the timeout test uses a 0.2 s client timeout)."""

from __future__ import annotations

import random
import subprocess
import sys

import numpy as np
import pytest

from hmem.embedders import Embedder
from hmem.embedders.openai_compat import OpenAIEmbedder
from hmem.errors import EmbedderError, EmbedderUnavailable
from tests.support.fake_openai import EMBEDDINGS, FakeOpenAI, Reply, embeddings_handler, fake_vector

MODEL = "fake-embed-8"
KEY = "sk-test-4f2a"
DIMS = 8


def expected(texts: list[str], dims: int = DIMS) -> np.ndarray:
    vecs = np.array([fake_vector(t, dims) for t in texts], dtype=np.float64)
    return (vecs / np.linalg.norm(vecs, axis=1, keepdims=True)).astype(np.float32)


@pytest.fixture
def server():
    with FakeOpenAI() as srv:
        srv.route(EMBEDDINGS, embeddings_handler(dims=DIMS))
        yield srv


@pytest.fixture
def sleeps() -> list[float]:
    """The backoff delays the embedder asked for (it never really sleeps in these tests)."""
    return []


@pytest.fixture
def make(server, sleeps):
    """Build an embedder pointed at the fake server; configuration only from arguments."""
    pytest.importorskip("openai")
    made: list[OpenAIEmbedder] = []

    def build(**kwargs) -> OpenAIEmbedder:
        options = dict(
            base_url=server.base_url,
            api_key=KEY,
            env={},
            sleep=sleeps.append,
            rng=random.Random(0),
        )
        options.update(kwargs)
        embedder = OpenAIEmbedder(options.pop("model", MODEL), **options)
        made.append(embedder)
        return embedder

    yield build
    for embedder in made:
        embedder.close()


def inputs(server: FakeOpenAI) -> list[list[str]]:
    return [r.json["input"] for r in server.requests_to(EMBEDDINGS)]


# happy paths --------------------------------------------------------------------------------------


def test_batches_preserve_order_and_normalise(make, server):
    texts = [f"text number {i}" for i in range(7)]
    embedder = make(dims=DIMS, batch_size=3)
    out = embedder.embed(texts)

    assert inputs(server) == [texts[0:3], texts[3:6], texts[6:7]]
    assert out.dtype == np.float32 and out.shape == (7, DIMS)
    np.testing.assert_allclose(out, expected(texts), rtol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, rtol=1e-6)
    for request in server.requests_to(EMBEDDINGS):
        assert request.method == "POST"
        assert request.json["model"] == MODEL
        assert request.json["encoding_format"] == "float"
        assert "dimensions" not in request.json  # dims is checked, never requested


def test_order_follows_index_when_items_come_back_shuffled(make, server):
    server.route(EMBEDDINGS, embeddings_handler(dims=DIMS, shuffle=True))
    texts = ["alpha", "beta", "gamma", "delta", "epsilon"]
    out = make().embed(texts)

    sent = embeddings_handler(dims=DIMS, shuffle=True)(server.requests[0]).body["data"]
    assert [item["index"] for item in sent] != list(range(len(texts)))  # really shuffled
    np.testing.assert_allclose(out, expected(texts), rtol=1e-6)


def test_auth_header_carries_the_key(make, server):
    make().embed(["hello"])
    (request,) = server.requests_to(EMBEDDINGS)
    assert request.headers["authorization"] == f"Bearer {KEY}"


def test_dims_learned_from_first_response_without_a_probe(make, server):
    embedder = make()
    embedder.embed(["one", "two"])
    assert embedder.dims == DIMS
    assert inputs(server) == [["one", "two"]]


def test_dims_probed_on_first_use(make, server):
    embedder = make()
    assert embedder.dims == DIMS
    assert len(inputs(server)) == 1
    assert embedder.dims == DIMS  # once
    assert len(inputs(server)) == 1


def test_blank_texts_get_zero_rows_and_are_not_sent(make, server):
    out = make(dims=DIMS).embed(["", "real text", "   "])
    assert inputs(server) == [["real text"]]
    assert not out[0].any() and not out[2].any()
    np.testing.assert_allclose(out[1], expected(["real text"])[0], rtol=1e-6)
    assert make(dims=DIMS).embed([]).shape == (0, DIMS)


def test_is_an_embedder_and_model_is_the_name(make):
    embedder = make(dims=DIMS)
    assert isinstance(embedder, Embedder)
    assert embedder.model == MODEL and embedder.dims == DIMS


# retries ------------------------------------------------------------------------------------------


def test_429_is_retried_then_succeeds(make, server, sleeps):
    server.script(EMBEDDINGS, Reply.error(429, "slow down"), Reply.error(429, "slow down"))
    out = make(dims=DIMS, max_attempts=4, backoff=0.5).embed(["retry me"])

    np.testing.assert_allclose(out, expected(["retry me"]), rtol=1e-6)
    attempts = server.requests_to(EMBEDDINGS)
    assert len(attempts) == 3
    assert len(sleeps) == 2
    # our loop, not the client's: every request is the client's first try
    assert {r.headers["x-stainless-retry-count"] for r in attempts} == {"0"}


def test_retry_after_is_honoured_up_to_the_cap(make, server, sleeps):
    server.script(EMBEDDINGS, Reply.error(429, **{"Retry-After": "3"}))
    make(dims=DIMS, backoff=0.01, max_backoff=2.0).embed(["x"])
    assert sleeps == [2.0]  # Retry-After 3 s, capped at max_backoff


def test_500_on_every_attempt_is_an_embedder_error(make, server, sleeps):
    server.route(EMBEDDINGS, lambda request: Reply.error(500, "boom"))
    with pytest.raises(EmbedderError) as info:
        make(dims=DIMS, max_attempts=3, backoff=0.5).embed(["x"])

    assert len(server.requests_to(EMBEDDINGS)) == 3
    message = str(info.value)
    assert "HTTP 500" in message and "boom" in message and "3 attempts" in message
    assert "check" in message
    # exponential backoff with equal jitter: attempt k waits in [b*2^(k-1)/2, b*2^(k-1)]
    assert len(sleeps) == 2
    assert 0.25 <= sleeps[0] <= 0.5 and 0.5 <= sleeps[1] <= 1.0


def test_timeout_is_retried_then_an_embedder_error(make, server):
    server.script(EMBEDDINGS, Reply.hang(), Reply.hang())
    with pytest.raises(EmbedderError, match=r"no answer within 0\.2 s \(after 2 attempts\)"):
        make(dims=DIMS, timeout=0.2, max_attempts=2).embed(["x"])
    assert len(server.requests_to(EMBEDDINGS)) == 2


def test_dropped_connection_is_retried(make, server):
    server.script(EMBEDDINGS, Reply.disconnect())
    out = make(dims=DIMS).embed(["x"])
    assert len(server.requests_to(EMBEDDINGS)) == 2
    np.testing.assert_allclose(out, expected(["x"]), rtol=1e-6)


def test_unreachable_server_names_the_url(make):
    with FakeOpenAI() as gone:
        url = gone.base_url
    with pytest.raises(EmbedderError, match="HMEM_BASE_URL") as info:
        make(base_url=url, dims=DIMS, max_attempts=2).embed(["x"])
    assert url in str(info.value)


@pytest.mark.parametrize(
    ("status", "hint"),
    [
        (401, "HMEM_API_KEY"),
        (403, "HMEM_API_KEY"),
        (404, "HMEM_BASE_URL"),
        (400, "HMEM_EMBED_MODEL"),
    ],
)
def test_client_errors_are_not_retried(make, server, status, hint):
    server.script(EMBEDDINGS, Reply.error(status, "nope", type="invalid_request_error"))
    with pytest.raises(EmbedderError, match=f"HTTP {status}") as info:
        make(dims=DIMS).embed(["x"])
    assert hint in str(info.value)
    assert KEY not in str(info.value)
    assert len(server.requests_to(EMBEDDINGS)) == 1


# response checks ----------------------------------------------------------------------------------


def test_wrong_dims_is_an_embedder_error(make, server):
    with pytest.raises(EmbedderError, match="8 dims, expected 16") as info:
        make(dims=16).embed(["x"])
    assert "HMEM_EMBED_DIMS" in str(info.value)
    assert len(server.requests_to(EMBEDDINGS)) == 1  # not retried


def test_dims_changing_between_batches_is_an_embedder_error(make, server):
    embedder = make(batch_size=1)
    embedder.embed(["first"])
    server.route(EMBEDDINGS, embeddings_handler(dims=DIMS + 1))
    with pytest.raises(EmbedderError, match="9 dims, expected 8"):
        embedder.embed(["second"])


def item(index, embedding):
    return {"object": "embedding", "index": index, "embedding": embedding}


@pytest.mark.parametrize(
    ("reply", "match"),
    [
        (Reply.raw(b'{"data": [ {"index": 0,'), "not JSON"),
        (Reply.raw(b"<html>502 Bad Gateway</html>", content_type="text/html"), "not JSON"),
        (Reply.json({"object": "list"}), "no 'data' list"),
        (Reply.json({"data": [item(0, [1.0] * DIMS)]}), "1 vectors for 2 inputs"),
        (Reply.json({"data": [item(0, [1.0] * DIMS), item(0, [1.0] * DIMS)]}), "index 0"),
        (Reply.json({"data": [item(0, [1.0] * DIMS), item(2, [1.0] * DIMS)]}), "index 2"),
        (Reply.json({"data": [item(0, [1.0] * DIMS), {"embedding": [1.0] * DIMS}]}), "index None"),
        (Reply.json({"data": [item(0, [1.0] * DIMS), item(1, "AAAA")]}), "not a list of numbers"),
        (Reply.json({"data": [item(0, [1.0] * DIMS), item(1, [1.0, "x"] * 4)]}), "numbers"),
        (Reply.json({"data": [item(0, [1.0] * DIMS), item(1, [float("nan")] * DIMS)]}), "NaN"),
        (Reply.json({"data": [item(0, [1.0] * DIMS), item(1, [1.0] * 3)]}), "3 dims, expected 8"),
    ],
)
def test_malformed_responses_are_embedder_errors(make, server, reply, match):
    server.script(EMBEDDINGS, reply)
    with pytest.raises(EmbedderError, match=match):
        make().embed(["a", "b"])
    assert len(server.requests_to(EMBEDDINGS)) == 1


# configuration ------------------------------------------------------------------------------------


def test_missing_config_names_the_variables():
    with pytest.raises(EmbedderUnavailable) as info:
        OpenAIEmbedder(env={})
    message = str(info.value)
    for name in ("HMEM_BASE_URL", "HMEM_API_KEY", "HMEM_EMBED_MODEL"):
        assert name in message


def test_partial_config_names_only_what_is_missing():
    env = {"HMEM_BASE_URL": "http://127.0.0.1:9/v1", "HMEM_EMBED_MODEL": MODEL}
    with pytest.raises(EmbedderUnavailable, match="set HMEM_API_KEY ") as info:
        OpenAIEmbedder(env=env)
    assert "HMEM_BASE_URL," not in str(info.value)


def test_config_from_environment(server):
    pytest.importorskip("openai")
    env = {
        "HMEM_BASE_URL": server.base_url,
        "HMEM_API_KEY": KEY,
        "HMEM_EMBED_MODEL": MODEL,
        "HMEM_EMBED_DIMS": str(DIMS),
    }
    embedder = OpenAIEmbedder(env=env)
    try:
        assert (embedder.model, embedder.dims) == (MODEL, DIMS)
        assert server.requests == []  # dims given: no probe
        embedder.embed(["x"])
        assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"
    finally:
        embedder.close()


def test_bad_dims_setting_is_unavailable():
    env = {"HMEM_BASE_URL": "http://x/v1", "HMEM_API_KEY": "k", "HMEM_EMBED_MODEL": "m"}
    with pytest.raises(EmbedderUnavailable, match="HMEM_EMBED_DIMS"):
        OpenAIEmbedder(env={**env, "HMEM_EMBED_DIMS": "many"})


def test_missing_openai_package_names_the_install_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "openai", None)  # makes `import openai` raise ImportError
    with pytest.raises(EmbedderUnavailable, match=r"pip install 'hmem\[openai\]'"):
        OpenAIEmbedder("m", base_url="http://127.0.0.1:9/v1", api_key="k", env={})


def test_importing_the_module_does_not_import_openai():
    code = "import sys, hmem.embedders.openai_compat; assert 'openai' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)
