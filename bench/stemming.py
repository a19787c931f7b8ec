"""What stemming costs: the English Snowball stemmer in snowballstemmer's pure Python against
the one hmem uses (PyStemmer's compiled Snowball, when installed), over every distinct word of
LoCoMo's turns, and whether their stems agree.

    python -m bench.stemming [--data ../shared/data/locomo10.json]

The index caches a stem per distinct word, so this is what a cold process or a rebuild pays
once per word of its vocabulary.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from snowballstemmer.english_stemmer import EnglishStemmer

from bench.locomo_data import DEFAULT_DATA, load, sessions, turn_text
from projections.text import STEMMER, WORD


def vocabulary(path: Path) -> list[str]:
    samples, _, _ = load(path)
    words: set[str] = set()
    for sample in samples:
        for _, turns in sessions(sample["conversation"]):
            for turn in turns:
                words.update(WORD.findall(turn_text(turn).casefold()))
    return sorted(words)


def per_word_us(stem, words: list[str]) -> float:  # type: ignore[no-untyped-def]
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        for word in words:
            stem(word)
        best = min(best, time.perf_counter() - started)
    return best / len(words) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path,
                        default=Path(os.environ.get("HMEM_LOCOMO", DEFAULT_DATA)))
    words = vocabulary(parser.parse_args().data)
    python = EnglishStemmer()
    used = type(STEMMER).__module__
    slow = per_word_us(python.stemWord, words)
    fast = per_word_us(STEMMER.stemWord, words)
    differ = sum(python.stemWord(w) != STEMMER.stemWord(w) for w in words)
    print(f"{len(words):,} distinct words; stemmer in use: {used}")
    print(f"pure Python: {slow:.2f} us/word; in use: {fast:.2f} us/word ({slow / fast:.1f}x); "
          f"stems that differ: {differ}")


if __name__ == "__main__":
    main()
