"""The embedder protocol, and the deterministic hash embedder used in tests."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from hmem.errors import EmbedderError, InvalidInput
from projections.text import tokenize

__all__ = ["Embedder", "HashEmbedder", "check_output", "check_texts", "embed_behind"]


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors. ``model`` is the name recorded with every vector (events say
    which model made them); ``dims`` is the vector length. ``embed`` returns a float32 array of
    shape ``(len(texts), dims)`` with L2-normalised rows. hmem never asks for blank texts
    (validation rejects them first); what a blank text gets is up to the model (MiniLM embeds
    its [CLS][SEP]; the OpenAI-compatible embedder returns a zero row without a request).

    An embedder may also offer ``embed_behind(texts)``: the same vectors, computed so as to
    leave the process's queries room (the local model keeps a core free); the background
    worker uses it when there is one (:func:`embed_behind`)."""

    @property
    def model(self) -> str: ...

    @property
    def dims(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


def embed_behind(embedder: Embedder, texts: Sequence[str]) -> np.ndarray:
    """``embedder``'s vectors of ``texts`` for a background worker: its ``embed_behind`` if it
    has one, else its ``embed``."""
    behind = getattr(embedder, "embed_behind", None)
    vectors: np.ndarray = embedder.embed(texts) if behind is None else behind(texts)
    return vectors


def check_texts(texts: Sequence[str]) -> list[str]:
    """The texts to embed as a list; a typed error for one string or a non-string item."""
    if isinstance(texts, str):
        raise InvalidInput("embed() takes a sequence of texts, not one string")
    texts = list(texts)
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise InvalidInput(f"texts[{i}] is {type(text).__name__}, expected str")
    return texts


def check_output(embedder: Embedder, texts: Sequence[str], out: np.ndarray) -> np.ndarray:
    """Validate an embedder's output shape and values; returns it as C-contiguous float32."""
    arr = np.ascontiguousarray(out, dtype=np.float32)
    if arr.shape != (len(texts), embedder.dims):
        raise EmbedderError(
            f"embedder {embedder.model!r} returned shape {arr.shape}, expected "
            f"({len(texts)}, {embedder.dims})"
        )
    if not np.isfinite(arr).all():
        raise EmbedderError(f"embedder {embedder.model!r} returned NaN or infinite values")
    return arr


class HashEmbedder:
    """Deterministic feature hashing of word tokens and character trigrams (for tests).

    Texts sharing words get similar vectors; no model, no randomness, no network.
    """

    def __init__(self, dims: int = 64, model: str | None = None) -> None:
        if dims < 2:
            raise ValueError("dims must be at least 2")
        self.dims = dims
        self.model = model or f"hash-{dims}"

    def _features(self, text: str) -> list[str]:
        words = tokenize(text, keep_stopwords=False) or tokenize(text, keep_stopwords=True)
        grams = [w[i : i + 3] for w in words for i in range(max(1, len(w) - 2))]
        return words + ["#" + g for g in grams]

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dims), dtype=np.float32)
        for row, text in enumerate(texts):
            for feature in self._features(text):
                digest = hashlib.blake2b(feature.encode(), digest_size=8).digest()
                h = int.from_bytes(digest, "little")
                out[row, h % self.dims] += 1.0 if (h >> 32) & 1 else -1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, norms, out=out, where=norms > 0)
        return out
