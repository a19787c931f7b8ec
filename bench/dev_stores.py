"""The development sets' stores, built once under a directory and reused.

Embedding BEAM-500K's 38k turns with the local model takes most of an hour on two cores, so
``bench.recall_defaults``, ``bench.beam_recall --stores`` and ``bench.locomo --stores`` build
each set's store once under the directory given (``locomo-TAG`` and ``beam-TAG``, TAG the
embedder or ``none``, loaded as ``bench.locomo`` and ``bench.beam_recall`` load them) and open it
read-only after. ``references-TAG.json`` holds each namespace's reference time; a set is in it
once its store is whole.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from hmem import Memory

__all__ = ["dev_store"]


def dev_store(
    root: Path, name: str, embedder: str | None, build: Callable[[Memory], dict[str, str]]
) -> tuple[Memory, dict[str, datetime]]:
    """The store of set ``name`` ("locomo" or "beam") with ``embedder`` under ``root``, built
    on first use by ``build`` (it ingests the set and returns each namespace's reference time,
    ISO), and those reference times (by LoCoMo's sample id, BEAM's chat id as a string)."""
    tag = embedder or "none"
    refs_path = root / f"references-{tag}.json"
    refs = json.loads(refs_path.read_text()) if refs_path.exists() else {}
    path = root / f"{name}-{tag}"
    if name not in refs and path.exists():
        raise SystemExit(f"{path} is an unfinished build ({refs_path} does not list it): "
                         f"remove it and run again")
    m = Memory(path, embedder=embedder, fsync="never", read_only=name in refs)
    if name not in refs:
        try:
            refs[name] = build(m)
        except BaseException:
            m.close()
            raise
        refs_path.write_text(json.dumps(refs))
    return m, {k: datetime.fromisoformat(v) for k, v in refs[name].items()}
