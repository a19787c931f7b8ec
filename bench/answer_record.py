"""What the answer benchmark keeps of one question: the :class:`Record` the runner
(``bench.answer``) fills in and the report (``bench.answer_report``) sums, and the token count
both use."""

from __future__ import annotations

import math

import msgspec

from hmem.llm import Usage

__all__ = ["Record", "tokens"]


class Record(msgspec.Struct):
    """One question's trip through the loop (written to ``--out`` and summed by the report)."""

    qid: str
    category: str
    split: str | None
    question: str
    gold: str
    abstention: bool
    context_tokens: int
    hits: int
    recall_ms: float
    context: str = ""
    answer: str = ""
    label: str = ""  # CORRECT, WRONG, or INVALID when the judge never gave valid JSON
    reason: str = ""
    answer_usage: Usage = msgspec.field(default_factory=Usage)
    judge_usage: Usage = msgspec.field(default_factory=Usage)
    answer_ms: float = 0.0
    judge_ms: float = 0.0

    @property
    def correct(self) -> bool:
        return self.label == "CORRECT"


def tokens(text: str) -> int:
    """Tokens as hmem's budget counts them: characters / 4, rounded up."""
    return math.ceil(len(text) / 4)
