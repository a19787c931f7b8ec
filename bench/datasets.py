"""The data sets of the answer benchmark by name: each one's loader and default data.

A loader (``bench.locomo_data``, ``bench.longmemeval_data``, ``bench.beam_data``) reads its
official format into a ``bench.qa.Dataset`` and knows nothing of the runner; the runner
(``bench.answer``) finds loaders here, so the imports run one way: runner -> registry ->
loaders.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench import beam_data, locomo_data, longmemeval_data
from bench.qa import Dataset

__all__ = ["DATASETS", "NAMES", "DataSource", "default_data", "load_dataset"]


@dataclass(frozen=True)
class DataSource:
    """How to read one data set: its loader, the environment variable naming its file or
    directory, and the path used when that variable is unset (None: ``--data`` is needed)."""

    load: Callable[[Path], Dataset]
    env: str
    default: Path | None = None


DATASETS: dict[str, DataSource] = {
    "locomo": DataSource(locomo_data.answer_dataset, "HMEM_LOCOMO", locomo_data.DEFAULT_DATA),
    "longmemeval": DataSource(longmemeval_data.load, "HMEM_LONGMEMEVAL"),
    "beam": DataSource(beam_data.load, "HMEM_BEAM"),
}
NAMES = tuple(DATASETS)


def load_dataset(name: str, path: Path) -> Dataset:
    """The data set ``name`` read from ``path``."""
    source = DATASETS.get(name)
    if source is None:
        raise ValueError(f"unknown data set {name!r}; use one of {', '.join(NAMES)}")
    return source.load(path)


def default_data(name: str) -> Path | None:
    """Where ``name``'s data is when ``--data`` is not given: its environment variable, else its
    default path (LoCoMo's ../shared/data/locomo10.json), else None."""
    source = DATASETS[name]
    if source.default is not None:
        return Path(os.environ.get(source.env, source.default))
    value = os.environ.get(source.env)
    return Path(value) if value else None
