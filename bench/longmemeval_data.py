"""LongMemEval (Wu et al., ICLR 2025): its official files read for the answer benchmark.

A loader only (into a ``bench.qa.Dataset``; ``bench.datasets`` names it for the runner): the
command is ``python -m bench.longmemeval`` (or ``python -m bench.answer longmemeval``).

The official files (``longmemeval_s.json``, ``longmemeval_m.json``, ``longmemeval_oracle.json``
from github.com/xiaowu0162/LongMemEval) are a list of items with ``question_id``,
``question_type``, ``question``, ``answer``, ``question_date``, ``haystack_session_ids``,
``haystack_dates``, ``haystack_sessions`` (each session a list of ``{role, content}`` turns,
evidence turns marked ``has_answer: true``) and ``answer_session_ids``. A ``question_id``
ending in ``_abs`` marks an abstention question: the history does not hold the answer, and the
reply is judged on whether it says so. Dates look like ``2023/05/20 (Sat) 02:21``.

Each item has its own haystack, so each goes into its own namespace (named by its
question_id); sessions keep their dates as valid_from; turns are stored as spoken by ``user``
or ``assistant``, with source_ref ``<session id>:<turn index>``. Categories are the
question types; the report adds an ``abstention`` row over the ``_abs`` questions of every
type. As in the official evaluation, a ``single-session-preference`` answer is a description
of the reply wanted, so it is judged as a rubric. All options: ``python -m bench.answer --help``.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from bench.qa import QA, Conversation, Dataset, Session, Turn

__all__ = ["QUESTION_TYPES", "load", "parse_date"]

QUESTION_TYPES = (
    "single-session-user", "single-session-assistant", "single-session-preference",
    "multi-session", "knowledge-update", "temporal-reasoning",
)
_FORMATS = ("%Y/%m/%d (%a) %H:%M", "%Y/%m/%d %H:%M", "%Y/%m/%d")


def parse_date(text: str) -> datetime:
    """'2023/05/20 (Sat) 02:21' (or without weekday or time) -> an aware UTC datetime."""
    for fmt in _FORMATS:
        try:
            return datetime.strptime(text.strip(), fmt).replace(tzinfo=timezone.utc)
        except ValueError:
            continue
    raise ValueError(f"not a LongMemEval date: {text!r} (expected like '2023/05/20 (Sat) 02:21')")


def load(path: Path) -> Dataset:
    """The official JSON list (or JSON lines) as a :class:`Dataset`."""
    raw = Path(path).read_text()
    try:
        items = json.loads(raw)
    except json.JSONDecodeError:
        items = [json.loads(line) for line in raw.splitlines() if line.strip()]
    if not isinstance(items, list):
        raise ValueError(f"{path}: expected a JSON list of LongMemEval items")
    conversations, questions = [], []
    types: list[str] = list(QUESTION_TYPES)
    for item in items:
        conv, q = _item(item)
        conversations.append(conv)
        questions.append(q)
        if q.category not in types:
            types.append(q.category)
    return Dataset("longmemeval", conversations, questions, tuple(types))


def _item(item: dict[str, Any]) -> tuple[Conversation, QA]:
    qid = str(item["question_id"])
    ids, dates, sessions = (item["haystack_session_ids"], item["haystack_dates"],
                            item["haystack_sessions"])
    if not len(ids) == len(dates) == len(sessions):
        raise ValueError(
            f"{qid}: haystack_session_ids, haystack_dates and haystack_sessions differ in length "
            f"({len(ids)}, {len(dates)}, {len(sessions)})"
        )
    out, evidence = [], set()
    for sid, date, turns in zip(ids, dates, sessions, strict=True):
        parsed = []
        for i, turn in enumerate(turns):
            ref = f"{sid}:{i}"
            parsed.append(Turn(str(turn["role"]), str(turn["content"]), ref))
            if turn.get("has_answer"):
                evidence.add(ref)
        out.append(Session(parse_date(date), tuple(parsed), str(sid)))
    qtype, answer = str(item["question_type"]), str(item["answer"])
    q = QA(
        qid=qid, conversation=qid, category=qtype, question=str(item["question"]),
        answer=answer,
        # a preference question's "answer" describes the reply wanted: judged as a rubric
        rubric=(answer,) if qtype == "single-session-preference" else (),
        asked_at=parse_date(item["question_date"]), abstention=qid.endswith("_abs"),
        evidence=frozenset(evidence),
        evidence_sessions=frozenset(str(s) for s in item.get("answer_session_ids", ())),
    )
    return Conversation(qid, tuple(out)), q
