"""BEAM ("Beyond a Million Tokens", Tavakoli et al. 2025): its official files read for the
answer benchmark.

A loader only (into a ``bench.qa.Dataset``; ``bench.datasets`` names it for the runner): the
command is ``python -m bench.beam`` (or ``python -m bench.answer beam``).

The official layout (github.com/mohammadtavakoli78/BEAM, also what its download_dataset.py
writes from the Hugging Face copy): ``chats/<size>/<id>/chat.json`` and
``chats/<size>/<id>/probing_questions/probing_questions.json``. ``--data`` may be ``chats``,
one size directory, or one conversation directory. Like the official answer_generation.py, a
``chat_trunecated.json`` (sic) next to ``chat.json`` is used instead of it.

``chat.json`` is a list of batches ``{batch_number, turns: [[{role, id, content, time_anchor?,
index?, question_type?}, ...], ...]}``; a batch's date is its ``time_anchor`` (e.g.
``March-15-2024``), given on the batch or on its first user message, and carries forward to
batches without one. ``probing_questions.json`` maps each of the ten abilities (abstention,
contradiction_resolution, ...) to questions ``{question, answer | ideal_response |
ideal_answer | ideal_summary | expected_compliance, rubric: [...], source_chat_ids, ...}``.

Each conversation goes into its own namespace (``<size>/<id>``), one session per batch, one
fact per message (speaker ``user``/``assistant``, source_ref = the message id, the generator's
``->-> 1,2`` index marker removed). Questions are asked at the last batch's date. The judge
sees the reference answer and the rubric, and grades CORRECT only when every rubric point is
met (the rubric wins where the two disagree, as they sometimes do): one binary verdict, stricter
than BEAM's official score, the mean of 0/0.5/1 per rubric point. The 10M conversations (``plan-*``
sub-directories) are not read.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from bench.qa import QA, Conversation, Dataset, Session, Turn

__all__ = ["ABILITIES", "load", "parse_anchor", "conversation_dirs"]

ABILITIES = (
    "abstention", "contradiction_resolution", "event_ordering", "information_extraction",
    "instruction_following", "knowledge_update", "multi_session_reasoning",
    "preference_following", "summarization", "temporal_reasoning",
)
ANSWER_FIELDS = ("answer", "ideal_response", "ideal_answer", "ideal_summary",
                 "expected_compliance")
_QUESTIONS = Path("probing_questions") / "probing_questions.json"
_MARKER = re.compile(r"\s*->->\s*\d+\s*,\s*\d+\s*$")
_FORMATS = ("%B-%d-%Y", "%b-%d-%Y", "%Y-%m-%d", "%B %d, %Y")


def parse_anchor(text: str) -> datetime:
    """'March-15-2024' -> an aware UTC datetime."""
    for fmt in _FORMATS:
        try:
            return datetime.strptime(text.strip(), fmt).replace(tzinfo=timezone.utc)
        except ValueError:
            continue
    raise ValueError(f"not a BEAM time anchor: {text!r} (expected like 'March-15-2024')")


def conversation_dirs(root: Path) -> list[Path]:
    """Every directory under ``root`` (itself included) holding a chat and its questions,
    sizes and ids in numeric order."""
    root = Path(root)
    found = [p.parent.parent for p in root.rglob(str(_QUESTIONS))]
    found = [d for d in found
             if (d / "chat.json").exists() or (d / "chat_trunecated.json").exists()]

    def key(d: Path) -> tuple[Any, ...]:
        return tuple((0, int(part), "") if part.isdigit() else (1, 0, part)
                     for part in d.relative_to(root).parts)

    return sorted(set(found), key=key)


def load(path: Path) -> Dataset:
    """Every conversation under ``path`` and its probing questions as a :class:`Dataset`."""
    root = Path(path)
    dirs = conversation_dirs(root)
    if not dirs:
        raise ValueError(f"{root}: no BEAM conversation (<id>/chat.json with {_QUESTIONS})")
    conversations, questions, abilities = [], [], list(ABILITIES)
    for d in dirs:
        cid = f"{d.parent.name}/{d.name}"  # <size>/<id>
        chat = d / "chat_trunecated.json"
        if not chat.exists():
            chat = d / "chat.json"
        conv = _conversation(cid, json.loads(chat.read_text()), chat)
        conversations.append(conv)
        asked_at = conv.sessions[-1].when
        probing = json.loads((d / _QUESTIONS).read_text())
        for ability, items in probing.items():
            if ability not in abilities:
                abilities.append(ability)
            for i, item in enumerate(items):
                questions.append(_question(cid, ability, i, item, asked_at, d / _QUESTIONS))
    return Dataset("beam", conversations, questions, tuple(abilities))


def _conversation(cid: str, batches: list[dict[str, Any]], path: Path) -> Conversation:
    anchors: list[str | None] = []
    sessions_turns: list[tuple[str, tuple[Turn, ...]]] = []
    for n, batch in enumerate(batches):
        anchor = batch.get("time_anchor")
        turns = []
        for group in batch.get("turns", []):
            messages = group if isinstance(group, list) else [group]
            for m in messages:
                anchor = anchor or m.get("time_anchor")
                text = _MARKER.sub("", str(m.get("content", "")))
                ref = str(m["id"]) if "id" in m else None
                turns.append(Turn(str(m.get("role", "user")), text, ref))
        anchors.append(anchor)
        sessions_turns.append((f"batch-{batch.get('batch_number', n + 1)}", tuple(turns)))
    known = [a for a in anchors if a]
    if not known:
        raise ValueError(f"{path}: no time_anchor in any batch")
    current = known[0]  # batches before the first anchor take it
    sessions = []
    for anchor, (sid, turns) in zip(anchors, sessions_turns, strict=True):
        current = anchor or current
        sessions.append(Session(parse_anchor(current), turns, sid))
    return Conversation(cid, tuple(sessions))


def _question(
    cid: str, ability: str, i: int, item: dict[str, Any], asked_at: datetime, path: Path
) -> QA:
    if "question" not in item:
        raise ValueError(f"{path}: {ability}[{i}] has no 'question'")
    answer = next((str(item[f]) for f in ANSWER_FIELDS if item.get(f)), "")
    rubric = tuple(str(r) for r in item.get("rubric", ()))
    if not answer and not rubric:
        raise ValueError(f"{path}: {ability}[{i}] has no reference answer and no rubric")
    ids = item.get("source_chat_ids", ())
    if isinstance(ids, dict):  # e.g. {"first_statement": [58], "second_statement": [24]}
        ids = [x for v in ids.values() for x in (v if isinstance(v, list) else [v])]
    return QA(
        qid=f"{cid}:{ability}:{i}", conversation=cid, category=ability,
        question=str(item["question"]), answer=answer or "; ".join(rubric), asked_at=asked_at,
        abstention=ability == "abstention", rubric=rubric,
        evidence=frozenset(str(x) for x in ids),
    )
