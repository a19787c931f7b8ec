"""The data every answer benchmark is turned into: conversations to ingest, questions to ask.

A loader (``bench.locomo_data.answer_dataset``, ``bench.longmemeval_data.load``,
``bench.beam_data.load``) reads its official format into a :class:`Dataset`;
``bench.datasets`` names the loaders and ``bench.answer`` runs one loop over any of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime


@dataclass(frozen=True)
class Turn:
    """One message: who said it, what, and an id pointing back into the source file."""

    speaker: str
    text: str
    ref: str | None = None


@dataclass(frozen=True)
class Session:
    """Turns that happened together, at one time (stored as their ``valid_from``)."""

    when: datetime
    turns: tuple[Turn, ...]
    id: str | None = None


@dataclass(frozen=True)
class Conversation:
    """A history ingested into its own namespace."""

    id: str
    sessions: tuple[Session, ...]


@dataclass(frozen=True)
class QA:
    """One question, asked against conversation ``conversation`` at ``asked_at``.

    ``abstention``: the history does not hold the answer; the right reply says so, and the
    judge grades that. ``rubric``: points the reply must make (BEAM). ``split``: e.g. LoCoMo's
    dev (conversations recall was tuned on) vs held-out.
    """

    qid: str
    conversation: str
    category: str
    question: str
    answer: str
    asked_at: datetime
    abstention: bool = False
    rubric: tuple[str, ...] = ()
    evidence: frozenset[str] = frozenset()  # refs of the turns that hold the answer
    evidence_sessions: frozenset[str] = frozenset()  # ids of the sessions that hold it
    split: str | None = None


@dataclass(frozen=True)
class Reference:
    """A published number to print beside ours (same metric, same questions)."""

    system: str
    j: float  # percent
    note: str = ""


@dataclass
class Dataset:
    name: str
    conversations: list[Conversation]
    questions: list[QA]
    categories: tuple[str, ...]  # report order
    references: tuple[Reference, ...] = ()
    reference_note: str = ""
    notes: list[str] = field(default_factory=list)  # what the loader skipped, and why

    def subset(self, max_questions: int | None) -> Dataset:
        """The first ``max_questions`` questions (in file order) and only the conversations
        they need; everything when ``None``."""
        if max_questions is None or max_questions >= len(self.questions):
            return self
        questions = self.questions[:max_questions]
        needed = {q.conversation for q in questions}
        return Dataset(
            self.name, [c for c in self.conversations if c.id in needed], questions,
            self.categories, self.references, self.reference_note,
            [*self.notes, f"limited to the first {max_questions} questions"],
        )
