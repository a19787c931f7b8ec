"""LoCoMo's data file (``locomo10.json``): conversations, sessions, questions, evidence ids.

Read by the retrieval benchmark (``bench.locomo``: :func:`load`, :func:`session_facts`), the
peer comparison (``bench.peers``) and the answer benchmark (:func:`answer_dataset`, through
``bench.datasets``). A loader only: it imports nothing of the benchmarks that use it.

Categories follow LoCoMo's own code: 1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop
(Mem0's paper labels the same numbers differently); 5 is adversarial and left out. The
development split is conv-26 and conv-30 (the only conversations any knob was tuned on); the
other eight are held out.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from bench.qa import QA, Conversation, Dataset, Reference, Session, Turn

__all__ = [
    "ANSWER_REFERENCES", "CATEGORIES", "DEFAULT_DATA", "DEV", "Question", "answer_dataset",
    "load", "parse_evidence", "parse_session_date", "session_facts", "sessions", "split_of",
    "turn_text",
]

DEV = ("conv-26", "conv-30")
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo10.json"


@dataclass
class Question:
    sample: str
    text: str
    category: int
    evidence: frozenset[str]


def split_of(sample_id: str) -> str:
    """'dev' for the two conversations knobs were tuned on, else 'held-out'."""
    return "dev" if sample_id in DEV else "held-out"


def parse_session_date(text: str) -> datetime:
    """'1:56 pm on 8 May, 2023' -> an aware UTC datetime."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=timezone.utc)


_EVIDENCE = re.compile(r"D:?(\d+):(\d+)")


def parse_evidence(items: list[str]) -> frozenset[str]:
    """Normalise LoCoMo's evidence ids, including its known warts ('D8:6; D9:17', 'D:11:26',
    'D30:05', several ids in one string); unparseable fragments are dropped."""
    out = set()
    for item in items:
        for piece in re.split(r"[;,\s]+", str(item)):
            m = _EVIDENCE.fullmatch(piece.strip())
            if m:
                out.add(f"D{int(m.group(1))}:{int(m.group(2))}")
    return frozenset(out)


def turn_text(turn: dict[str, Any]) -> str:
    text = str(turn.get("text", "")).strip()
    caption = turn.get("blip_caption")
    if caption:
        text = f"{text} [shares a photo: {caption}]".strip()
    return text


def sessions(conv: dict[str, Any]) -> list[tuple[datetime, list[dict[str, Any]]]]:
    """(date, turns) of every session that has turns (conv-26 lists dates without sessions)."""
    out = []
    n = 1
    while f"session_{n}_date_time" in conv:
        turns = conv.get(f"session_{n}") or []
        if turns:
            out.append((parse_session_date(conv[f"session_{n}_date_time"]), turns))
        n += 1
    return out


def load(path: Path) -> tuple[list[dict[str, Any]], list[Question], int]:
    data = json.loads(path.read_text())
    questions, skipped = [], 0
    for sample in data:
        for qa in sample["qa"]:
            if qa["category"] not in CATEGORIES:
                continue
            evidence = parse_evidence(qa.get("evidence", []))
            if not evidence:
                skipped += 1
                continue
            questions.append(
                Question(sample["sample_id"], qa["question"], qa["category"], evidence)
            )
    return data, questions, skipped


def session_facts(sample: dict[str, Any]) -> list[tuple[datetime, list[dict[str, Any]]]]:
    """(session date, ``remember`` arguments of each non-empty turn) for every session."""
    return [
        (date, [
            {
                "subject": t["speaker"], "text": turn_text(t), "valid_from": date,
                "source_ref": t["dia_id"], "source_agent": "locomo",
            }
            for t in turns if turn_text(t)
        ])
        for date, turns in sessions(sample["conversation"])
    ]


# Published LLM-judge J on categories 1-4 (1,540 questions), gpt-4o-mini answering and judging.
ANSWER_REFERENCES = (
    Reference("Mem0", 66.9),
    Reference("Zep", 75.1, "corrected"),
    Reference("full context", 72.9),
    Reference("plain-files agent", 74.0),
)


def answer_dataset(path: Path) -> Dataset:
    """LoCoMo for ``bench.answer``: every question of categories 1-4 that has an answer (also
    those without evidence ids), asked at the conversation's last session date; split = dev
    (conv-26, conv-30, where recall was tuned) or held-out."""
    data = json.loads(Path(path).read_text())
    conversations, questions, left_out = [], [], 0
    for sample in data:
        sid = sample["sample_id"]
        found = sessions(sample["conversation"])
        conversations.append(Conversation(sid, tuple(
            Session(date, tuple(Turn(t["speaker"], turn_text(t), t["dia_id"]) for t in turns))
            for date, turns in found
        )))
        for i, qa in enumerate(sample["qa"]):
            if qa["category"] not in CATEGORIES or "answer" not in qa:
                left_out += 1
                continue
            questions.append(QA(
                qid=f"{sid}:{i}", conversation=sid, category=CATEGORIES[qa["category"]],
                question=qa["question"], answer=str(qa["answer"]), asked_at=found[-1][0],
                evidence=parse_evidence(qa.get("evidence", [])),
                split="dev" if sid in DEV else "held-out",
            ))
    return Dataset(
        "locomo", conversations, questions, tuple(CATEGORIES.values()), ANSWER_REFERENCES,
        "Published LLM-judge J on LoCoMo categories 1-4 (gpt-4o-mini answering and judging; "
        "other systems' own prompts):",
        [f"{left_out} questions of category 5 (adversarial) or without an answer left out, as "
         f"in the published numbers"],
    )
