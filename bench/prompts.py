"""The fixed prompts of the answer benchmarks, and the judge's verdict schema.

Changing a prompt changes every number: bump its version, which is printed with each report
(and, being part of the prompt text, part of every cache key).
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

import msgspec

from bench.qa import QA

__all__ = [
    "ANSWER_VERSION", "JUDGE_VERSION", "ANSWER_MAX_TOKENS", "JUDGE_MAX_TOKENS", "Verdict",
    "answer_messages", "judge_messages",
]

ANSWER_VERSION = "answer-v1"
JUDGE_VERSION = "judge-v1"
ANSWER_MAX_TOKENS = 300
JUDGE_MAX_TOKENS = 200

ANSWER_SYSTEM = (
    "You answer a user's question about their past conversations, using only the memories "
    "given. Each memory says who said it and when it was true. [answer-v1]"
)

ANSWER_PROMPT = """Memories retrieved from past conversations (newest first):
{context}

Now: {now}
Question: {question}

Answer in a short phrase or a sentence or two. Resolve relative times against the date of the \
memory they appear in ("last week" said on 2023-05-08 is the week before 8 May 2023) and give \
absolute dates. Where a fact changed, answer with the latest version. Follow any standing \
instruction or preference of the user that the memories show. If the memories do not contain \
the answer, say that you don't know."""

JUDGE_SYSTEM = "You grade answers of a memory system against a gold answer. [judge-v1]"

JUDGE_PROMPT = """Question: {question}
Gold answer: {gold}
Generated answer: {answer}

Grade CORRECT when the generated answer gives the same fact(s) as the gold answer. Be generous \
about wording, length and format: "7 May 2023" and "May 7th, 2023" are the same date, and a \
longer answer that contains the gold fact is correct. Grade WRONG when it misses or contradicts \
the gold fact, gives a different date or period, or says it does not know.

Reply with only a JSON object: {{"reason": "<one short sentence>", \
"label": "CORRECT" or "WRONG"}}"""

ABSTAIN_PROMPT = """Question: {question}
This question cannot be answered from the conversation history. Why: {gold}
Generated answer: {answer}

Grade CORRECT when the generated answer recognises that the information is missing, unknown \
or was never mentioned (it may say what related information it does have). Grade WRONG when it \
asserts an answer to the question.

Reply with only a JSON object: {{"reason": "<one short sentence>", \
"label": "CORRECT" or "WRONG"}}"""


RUBRIC_PROMPT = """Question: {question}{reference}
Rubric, the points a good answer makes:
{points}
Generated answer: {answer}

Grade CORRECT when the generated answer meets every rubric point, in any wording (where the \
reference answer and the rubric disagree, the rubric decides). Grade WRONG when it misses or \
contradicts a point, or says it does not know.

Reply with only a JSON object: {{"reason": "<one short sentence>", \
"label": "CORRECT" or "WRONG"}}"""


class Verdict(msgspec.Struct, forbid_unknown_fields=True):
    """The judge's reply, decoded strictly: both fields, nothing else."""

    reason: str
    label: Literal["CORRECT", "WRONG"]

    @property
    def correct(self) -> bool:
        return self.label == "CORRECT"


def _day(dt: datetime) -> str:
    return dt.strftime("%A, %d %B %Y")


def answer_messages(q: QA, context: str) -> list[dict[str, str]]:
    """The answerer's prompt for ``q`` with the retrieved ``context`` block."""
    user = ANSWER_PROMPT.format(
        context=context or "(no memories found)", now=_day(q.asked_at), question=q.question
    )
    return [{"role": "system", "content": ANSWER_SYSTEM}, {"role": "user", "content": user}]


def judge_messages(q: QA, answer: str) -> list[dict[str, str]]:
    """The judge's prompt grading ``answer`` to ``q``: the abstention prompt for abstention
    questions, the rubric prompt when the data set gives rubric points (BEAM, LongMemEval's
    preference questions), else the gold-answer prompt."""
    if q.abstention:
        user = ABSTAIN_PROMPT.format(question=q.question, gold=q.answer, answer=answer)
    elif q.rubric:
        points = "\n".join(f"- {point}" for point in q.rubric)
        reference = "" if q.rubric == (q.answer,) else f"\nReference answer: {q.answer}"
        user = RUBRIC_PROMPT.format(question=q.question, reference=reference, points=points,
                                    answer=answer)
    else:
        user = JUDGE_PROMPT.format(question=q.question, gold=q.answer, answer=answer)
    return [{"role": "system", "content": JUDGE_SYSTEM}, {"role": "user", "content": user}]
