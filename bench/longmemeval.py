"""LongMemEval (Wu et al., ICLR 2025) for the answer benchmark.

    python -m bench.longmemeval --data longmemeval_s.json --dry-run
    python -m bench.longmemeval --data longmemeval_s.json --max-questions 50

The same as ``python -m bench.answer longmemeval``; all options: ``python -m bench.answer --help``.
The data set's format and how it is ingested: ``bench.longmemeval_data``.
"""

from __future__ import annotations

import sys

from bench.answer import main as answer_main


def main(argv: list[str] | None = None) -> int:
    return answer_main(argv, dataset="longmemeval")


if __name__ == "__main__":
    sys.exit(main())
