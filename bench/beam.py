"""BEAM ("Beyond a Million Tokens", Tavakoli et al. 2025) for the answer benchmark.

    python -m bench.beam --data BEAM/chats/100K --dry-run
    python -m bench.beam --data BEAM/chats --max-questions 40

The same as ``python -m bench.answer beam``; all options: ``python -m bench.answer --help``.
The data set's format and how it is ingested: ``bench.beam_data``.
"""

from __future__ import annotations

import sys

from bench.answer import main as answer_main


def main(argv: list[str] | None = None) -> int:
    return answer_main(argv, dataset="beam")


if __name__ == "__main__":
    sys.exit(main())
