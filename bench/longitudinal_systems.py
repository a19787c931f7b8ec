"""The four memories the longitudinal benchmark compares, each in its natural idiom.

Every system ingests the same statement stream (``bench.longitudinal_data``) and answers with
three primitives: ``value(subject, attribute, valid_at=, as_of=)``, ``source(subject,
attribute)`` and ``changed(subject, since, until)``. A value is read out of a retrieved text by
one shared rule, :func:`extract` (a regex per attribute template: "Maya7 lives in Lisbon" ->
"Lisbon"), so the systems differ only in what they store and what they retrieve. Every store
is scoped to the subject (hmem's ``subject=``, a grep for the name, a key, a namespace).

* ``hmem``: one namespace for everyone, no embedder (BM25 only), the Memory's clock set to each
  statement's transaction time. ``remember`` a state (with ``valid_from``); a change is a
  ``revise`` with ``valid_from``, a correction a ``revise`` without it, a retraction a
  ``forget``; the fact to revise is found as an agent would, by ``recall`` of the subject.
  Answers: ``recall`` (now), ``recall(valid_at=)``, ``recall(as_of=)``; ``diff`` names the
  attributes touched between two moments, kept when their ``as_of`` values differ; the source
  is the current hit's ``source_ref``.
* ``plain files``: one append-only markdown file, a line per statement as an agent writes it
  ("- 2025-03-01 (s12:t3) Maya7 lives in Lisbon", "... Correction: Maya7 lives in Lyon",
  "... Forget: Maya7's pet"), searched by grep for the subject; the answer is the latest
  matching line by note date (at or before the asked date: the notes know no other time).
* ``overwrite``: a dict (subject, attribute) -> (text, source_ref) updated in place and deleted
  on retraction, as Mem0's update does; it keeps no history, so a question about the past gets
  the current state and "what changed" gets nothing.
* ``sqlite-fts5``: ``bench.sqlite_baseline``'s schema (one namespace per subject) plus the
  insertion time; FTS5 ``bm25()`` over rows noted at or before the asked time, the newest
  matching row wins; a retraction DELETEs the attribute's rows.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from bench.longitudinal_data import (
    ATTRIBUTES,
    NOUNS,
    QUERIES,
    START,
    TEMPLATES,
    Answer,
    Question,
    Statement,
)
from bench.sqlite_baseline import SqliteStore, fts_query
from hmem import Memory

__all__ = ["LIMIT", "SYSTEMS", "System", "answer", "extract", "make_system"]

LIMIT = 10  # hits a retrieving system reads per question
_PATTERNS = {  # the templates are plain words: formatting them with groups makes the regex
    a: re.compile(t.format(s=r"(?P<s>\w+)", v="(?P<v>.+?)") + r"\s*$")
    for a, t in TEMPLATES.items()
}
_FORGET = re.compile(r"Forget: (?P<s>\w+)'s (?P<noun>\w+)\s*$")


def extract(text: str, subject: str, attribute: str) -> str | None:
    """The value ``text`` states for ``subject``'s ``attribute``, or None (the shared rule)."""
    m = _PATTERNS[attribute].search(text)
    if m is None or m["s"].casefold() != subject.casefold():
        return None
    return m["v"]


def query(subject: str, attribute: str) -> str:
    return QUERIES[attribute].format(s=subject)


class System:
    """A memory under test. ``changed`` defaults to comparing ``value(as_of=)`` at both ends."""

    name = "system"

    def ingest(self, st: Statement) -> None:
        raise NotImplementedError

    def finish(self, end: datetime) -> None:
        """Ingest is over; questions are asked at ``end``."""

    def value(self, subject: str, attribute: str, *, valid_at: datetime | None = None,
              as_of: datetime | None = None) -> str | None:
        raise NotImplementedError

    def source(self, subject: str, attribute: str) -> str | None:
        raise NotImplementedError

    def changed(self, subject: str, since: datetime, until: datetime) -> list[str]:
        return sorted(a for a in ATTRIBUTES
                      if self.value(subject, a, as_of=since) != self.value(subject, a, as_of=until))

    def close(self) -> None:
        pass


class DatedNotes(System):
    """A store of dated notes: ``latest`` finds the (value, source_ref) of the newest note on
    the attribute noted at or before a time; a note's date is all it knows of time."""

    def latest(self, subject: str, attribute: str,
               at: datetime | None) -> tuple[str, str] | None:
        raise NotImplementedError

    def value(self, subject: str, attribute: str, *, valid_at: datetime | None = None,
              as_of: datetime | None = None) -> str | None:
        hit = self.latest(subject, attribute, valid_at or as_of)
        return None if hit is None else hit[0]

    def source(self, subject: str, attribute: str) -> str | None:
        hit = self.latest(subject, attribute, None)
        return None if hit is None else hit[1]


def answer(system: System, q: Question) -> Answer:
    """``system``'s answer to ``q``."""
    if q.kind == "changed_between":
        assert q.at is not None and q.until is not None
        return system.changed(q.subject, q.at, q.until)
    assert q.attribute is not None
    if q.kind == "source":
        return system.source(q.subject, q.attribute)
    if q.kind == "valid_at":
        return system.value(q.subject, q.attribute, valid_at=q.at)
    if q.kind == "believed_at":
        return system.value(q.subject, q.attribute, as_of=q.at)
    return system.value(q.subject, q.attribute)


# -------------------------------------------------------------------------------------- hmem


class HmemSystem(System):
    name = "hmem"

    def __init__(self, root: Path) -> None:
        self.now = START
        self.m = Memory(root / "hmem", clock=self.clock, embedder=None, log_recalls=False,
                        source_agent="agent")

    def clock(self) -> datetime:
        return self.now

    def _hit(self, subject: str, attribute: str, *, valid_at: datetime | None = None,
             as_of: datetime | None = None) -> tuple[int, str, str | None] | None:
        """(fact id, value, source_ref) of the best hit stating ``attribute``."""
        hits = self.m.recall(query(subject, attribute), subject=subject, limit=LIMIT,
                             valid_at=valid_at, as_of=as_of)
        for h in hits:
            v = extract(h.text, subject, attribute)
            if v is not None:
                return h.id, v, h.source_ref
        return None

    def ingest(self, st: Statement) -> None:
        self.now = st.tx
        head = None if st.kind == "state" else self._hit(st.subject, st.attribute)
        if st.kind == "retraction":
            if head is not None:
                self.m.forget(head[0], reason="the user asked to forget it",
                              source_ref=st.source_ref)
        elif head is None:
            self.m.remember(st.subject, st.text, valid_from=st.valid_from,
                            source_ref=st.source_ref)
        elif st.kind == "change":
            self.m.revise(head[0], st.text, valid_from=st.valid_from, source_ref=st.source_ref)
        else:  # a correction: no valid_from
            self.m.revise(head[0], st.text, source_ref=st.source_ref,
                          reason="the earlier statement was wrong")

    def finish(self, end: datetime) -> None:
        self.now = end

    def value(self, subject: str, attribute: str, *, valid_at: datetime | None = None,
              as_of: datetime | None = None) -> str | None:
        hit = self._hit(subject, attribute, valid_at=valid_at, as_of=as_of)
        return None if hit is None else hit[1]

    def source(self, subject: str, attribute: str) -> str | None:
        hit = self._hit(subject, attribute)
        return None if hit is None else hit[2]

    def changed(self, subject: str, since: datetime, until: datetime) -> list[str]:
        d = self.m.diff(since, until)
        facts = [*d.added, *d.forgotten, *(r.old for r in d.revised), *(r.new for r in d.revised)]
        touched = {a for f in facts for a in ATTRIBUTES if extract(f.text, subject, a)}
        return sorted(a for a in touched
                      if self.value(subject, a, as_of=since) != self.value(subject, a, as_of=until))

    def close(self) -> None:
        self.m.close()


# -------------------------------------------------------------------------------- plain files


class PlainFiles(DatedNotes):
    name = "plain files"

    def __init__(self, root: Path) -> None:
        self.path = root / "notes.md"
        self.path.write_text("# Notes\n\n", encoding="utf-8")

    def ingest(self, st: Statement) -> None:
        if st.kind == "retraction":
            body = f"Forget: {st.subject}'s {NOUNS[st.attribute]}"
        else:
            body = ("Correction: " if st.kind == "correction" else "") + st.text
        with self.path.open("a", encoding="utf-8") as f:
            f.write(f"- {st.tx.date().isoformat()} ({st.source_ref}) {body}\n")

    def latest(self, subject: str, attribute: str,
                at: datetime | None) -> tuple[str, str] | None:
        """(value, ref) of the latest line about it noted on or before ``at``'s date."""
        grep = re.compile(rf"\b{re.escape(subject)}\b", re.IGNORECASE)
        line_re = re.compile(r"^- (\d{4}-\d{2}-\d{2}) \(([^)]*)\) (.*)$")
        cutoff = None if at is None else at.date().isoformat()
        current = None
        for line in self.path.read_text(encoding="utf-8").splitlines():
            m = line_re.match(line)
            if m is None or not grep.search(line) or (cutoff is not None and m[1] > cutoff):
                continue
            gone = _FORGET.search(m[3])
            if gone and gone["s"].casefold() == subject.casefold() \
                    and gone["noun"] == NOUNS[attribute]:
                current = None
            elif (v := extract(m[3], subject, attribute)) is not None:
                current = (v, m[2])
        return current


# ---------------------------------------------------------------------------------- overwrite


class Overwrite(System):
    name = "overwrite"

    def __init__(self, root: Path) -> None:
        self.memories: dict[tuple[str, str], tuple[str, str]] = {}

    def ingest(self, st: Statement) -> None:
        key = (st.subject, st.attribute)
        if st.kind == "retraction":
            self.memories.pop(key, None)
        else:
            self.memories[key] = (st.text, st.source_ref)

    def value(self, subject: str, attribute: str, *, valid_at: datetime | None = None,
              as_of: datetime | None = None) -> str | None:
        found = self.memories.get((subject, attribute))  # now: the store has no other time
        return None if found is None else extract(found[0], subject, attribute)

    def source(self, subject: str, attribute: str) -> str | None:
        found = self.memories.get((subject, attribute))
        return None if found is None else found[1]

    def changed(self, subject: str, since: datetime, until: datetime) -> list[str]:
        return []  # nothing it kept can tell


# ---------------------------------------------------------------------------- SQLite + FTS5


class SqliteFts(DatedNotes):
    name = "sqlite-fts5"

    def __init__(self, root: Path) -> None:
        self.store = SqliteStore(root / "memories.db")
        self.db = self.store.db
        self.db.execute("ALTER TABLE memories ADD COLUMN noted_at TEXT")
        self.db.commit()

    def ingest(self, st: Statement) -> None:
        with self.db:  # one transaction per statement
            if st.kind == "retraction":
                rows = self.db.execute("SELECT id, text FROM memories WHERE namespace = ?",
                                       (st.subject,)).fetchall()
                for rowid, text in rows:
                    if extract(text, st.subject, st.attribute) is not None:
                        self.db.execute("INSERT INTO memories_fts(memories_fts, rowid, text) "
                                        "VALUES ('delete', ?, ?)", (rowid, text))
                        self.db.execute("DELETE FROM memories WHERE id = ?", (rowid,))
                return
            cur = self.db.execute(
                "INSERT INTO memories(namespace, ref, text, noted_at) VALUES (?, ?, ?, ?)",
                (st.subject, st.source_ref, st.text, st.tx.isoformat()))
            self.db.execute("INSERT INTO memories_fts(rowid, text) VALUES (?, ?)",
                            (cur.lastrowid, st.text))

    def latest(self, subject: str, attribute: str,
                at: datetime | None) -> tuple[str, str] | None:
        match = fts_query(query(subject, attribute))
        assert match is not None
        rows = self.db.execute(
            "SELECT m.id, m.ref, m.text, m.noted_at FROM memories_fts "
            "JOIN memories m ON m.id = memories_fts.rowid "
            "WHERE memories_fts MATCH ? AND m.namespace = ? AND (? IS NULL OR m.noted_at <= ?) "
            "ORDER BY bm25(memories_fts) LIMIT ?",
            (match, subject, None if at is None else at.isoformat(),
             None if at is None else at.isoformat(), LIMIT)).fetchall()
        found = [(noted, rowid, v, ref) for rowid, ref, text, noted in rows
                 if (v := extract(text, subject, attribute)) is not None]
        if not found:
            return None
        _, _, v, ref = max(found)
        return v, ref

    def close(self) -> None:
        self.store.close()


SYSTEMS: dict[str, Callable[[Path], System]] = {
    "hmem": HmemSystem, "plain files": PlainFiles, "overwrite": Overwrite,
    "sqlite-fts5": SqliteFts,
}


def make_system(name: str, root: Path) -> System:
    """A fresh ``name`` system keeping its files under ``root`` (an existing directory)."""
    return SYSTEMS[name](root)

