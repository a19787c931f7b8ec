"""What replay and the reads return: frozen msgspec Structs (``msgspec.json.encode`` gives JSON),
and their text: ``print`` (and a notebook) shows what the CLI prints. Times in the text are UTC:
transaction times to the second; valid times as a date at midnight, to the minute otherwise.

``hmem.views`` re-exports every one of them."""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime, timezone
from typing import Any

import msgspec

from eventlog.events import (
    EmbeddingRecorded,
    EpisodeRecorded,
    Event,
    FactForgotten,
    FactRemembered,
    FactRevised,
    FactsErased,
    RecallServed,
)
from projections.printable import visible
from projections.records import Episode, Fact, Row
from projections.timeutil import from_us, from_us_opt

__all__ = [
    "Version",
    "FactView",
    "Belief",
    "Why",
    "SeenBy",
    "Revision",
    "Diff",
    "EpisodeView",
    "fact_view",
    "episode_view",
    "version_view",
    # their text (what print shows; hmem.adapters.cli_format builds on these)
    "belief_line", "belief_lines", "day", "diff_lines", "event_line", "fact_id", "fact_lines",
    "history_lines", "pretty_text", "quote", "said", "source_of", "tx", "valid_period", "why_lines",
]


_ERASED_REASON = re.compile(r"erased \(receipt \d+\)")  # projections/checks.py erased_reason


def pretty_text(self: object, p: Any, cycle: bool) -> None:
    """IPython / Jupyter show the text form (``str``), not the field dump, with the stored
    text's control characters shown as escapes (:func:`projections.printable.visible`)."""
    p.text("\n".join(visible(line) for line in str(self).split("\n")))


class Version(msgspec.Struct, frozen=True):
    """One bi-temporal row: true in the world over [valid_from, valid_to), believed over
    [tx_from, tx_to). ``None`` ends are open."""

    valid_from: datetime
    valid_to: datetime | None
    tx_from: datetime
    tx_to: datetime | None
    tx_from_seq: int
    tx_to_seq: int | None


class FactView(msgspec.Struct, frozen=True):
    """A fact with its provenance, chain links and every version row."""

    id: int
    namespace: str
    subject: str
    text: str
    confidence: float
    source_agent: str | None
    source_ref: str | None
    entities: tuple[str, ...]
    recorded_at: datetime
    supersedes: int | None
    revision: str | None
    reason: str | None
    superseded_by: int | None
    superseded_at: datetime | None
    forgotten_at: datetime | None
    forget_reason: str | None
    versions: tuple[Version, ...]
    derived_from: tuple[int, ...] = ()  # lineage: seqs of the episodes it was extracted from
    extractor: str | None = None  # the model that extracted it
    prompt_version: str | None = None
    category: str | None = None
    importance: int | None = None

    @property
    def forgotten(self) -> bool:
        return self.forgotten_at is not None

    @property
    def current(self) -> bool:
        """Believed now and not replaced by a newer version."""
        return self.superseded_by is None and self.forgotten_at is None

    def __str__(self) -> str:
        return "\n".join(fact_lines(self))

    _repr_pretty_ = pretty_text


class Belief(msgspec.Struct, frozen=True):
    """One row of an as-of answer: a fact as it was believed at a transaction time."""

    id: int
    subject: str
    text: str
    valid_from: datetime
    valid_to: datetime | None
    recorded_at: datetime
    confidence: float
    superseded: bool
    source_agent: str | None
    source_ref: str | None

    def __str__(self) -> str:
        return belief_line(self)

    _repr_pretty_ = pretty_text


class EpisodeView(msgspec.Struct, frozen=True):
    """One recorded conversation turn (an ``EpisodeRecorded`` event); ``seq`` is its id."""

    seq: int
    namespace: str
    session_id: str
    turn: int
    role: str
    speaker: str | None
    text: str
    observed_at: datetime
    recorded_at: datetime
    source_agent: str | None
    source_ref: str | None


class SeenBy(msgspec.Struct, frozen=True):
    """A logged recall that returned a version of the fact: when, to whom, at which rank."""

    seq: int
    served_at: datetime
    fact_id: int  # the version it returned
    rank: int
    query: str
    source_agent: str | None
    source_ref: str | None


class Why(msgspec.Struct, frozen=True):
    """Provenance of a fact: its source, the whole revision chain (oldest first) and the events;
    for extracted facts, ``episodes`` are the turns the chain was derived from; ``seen_by`` the
    logged recalls that returned any version of it (when recall logging is on)."""

    fact: FactView
    chain: tuple[FactView, ...]
    events: tuple[Event, ...]
    episodes: tuple[EpisodeView, ...] = ()
    seen_by: tuple[SeenBy, ...] = ()

    def __str__(self) -> str:
        return "\n".join(why_lines(self))

    _repr_pretty_ = pretty_text


class Revision(msgspec.Struct, frozen=True):
    old: FactView
    new: FactView
    kind: str  # "world" (the world changed) or "correction"


class Diff(msgspec.Struct, frozen=True):
    """What changed between two transaction times: events with since < seq <= until."""

    since_seq: int
    until_seq: int
    # When this namespace last changed at or before since_seq / until_seq (None if it had not):
    # the times of other namespaces' events are not shown.
    since_tx: datetime | None
    until_tx: datetime | None
    added: tuple[FactView, ...]
    revised: tuple[Revision, ...]
    forgotten: tuple[FactView, ...]
    # facts an erasure (a receipt in the range) ended: their texts are gone
    erased: tuple[FactView, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.added or self.revised or self.forgotten or self.erased)

    def __str__(self) -> str:
        return "\n".join(diff_lines(self))

    _repr_pretty_ = pretty_text


def version_view(row: Row) -> Version:
    return Version(
        valid_from=from_us(row.valid_from),
        valid_to=from_us_opt(row.valid_to),
        tx_from=from_us(row.tx_from),
        tx_to=from_us_opt(row.tx_to),
        tx_from_seq=row.tx_from_seq,
        tx_to_seq=row.tx_to_seq,
    )


# Fields a FactView copies from the Fact as they are, and those it shows as datetimes.
_FACT_TIMES = ("superseded_at", "forgotten_at")
_FACT_COPIED = tuple(
    name for name in FactView.__struct_fields__
    if name in Fact.__struct_fields__ and name not in _FACT_TIMES
)


def fact_view(fact: Fact) -> FactView:
    """The public view of a fact: its fields, with times as datetimes and rows as versions."""
    fields = {name: getattr(fact, name) for name in _FACT_COPIED}
    fields.update({name: from_us_opt(getattr(fact, name)) for name in _FACT_TIMES})
    return FactView(
        **fields,
        recorded_at=from_us(fact.created_at),
        versions=tuple(version_view(r) for r in fact.rows),
    )


def episode_view(e: Episode) -> EpisodeView:
    return EpisodeView(
        seq=e.seq, namespace=e.namespace, session_id=e.session_id, turn=e.turn, role=e.role,
        speaker=e.speaker, text=e.text, observed_at=from_us(e.observed_at),
        recorded_at=from_us(e.recorded_at), source_agent=e.source_agent, source_ref=e.source_ref,
    )


# ---------------------------------------------------------------------------- as text


def day(dt: datetime | None) -> str:
    """A valid (world) time in UTC: YYYY-MM-DD at midnight, else to the minute (or second), so
    a fact valid from 14:05 does not read as valid the whole day."""
    if dt is None:
        return "?"
    utc = dt.astimezone(timezone.utc)
    if (utc.hour, utc.minute, utc.second, utc.microsecond) == (0, 0, 0, 0):
        return utc.date().isoformat()
    precise = utc.second or utc.microsecond
    return utc.strftime("%Y-%m-%dT%H:%M:%SZ" if precise else "%Y-%m-%dT%H:%MZ")


def tx(dt: datetime | None) -> str:
    """A transaction time as ISO 8601 to the second, in UTC."""
    return "?" if dt is None else dt.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def fact_id(n: int | None) -> str:
    return "?" if n is None else f"#{n}"


def said(fid: int | None, subject: str, text: str) -> str:
    """``#id subject: "text"``; an erased fact (its subject and text gone) as ``#id [erased]``."""
    if not subject and not text:
        return f"{fact_id(fid)} {quote(text)}"
    return f"{fact_id(fid)} {subject}: {quote(text)}"


def quote(text: str) -> str:
    """``text`` in quotes; an erased text (the only empty one) as ``[erased]``."""
    if not text:
        return "[erased]"
    return '"' + text.replace("\n", " ") + '"'


def valid_period(valid_from: datetime | None, valid_to: datetime | None) -> str:
    if valid_to is None:
        return f"since {day(valid_from)}"
    return f"{day(valid_from)} to {day(valid_to)}"


def _believed(v: Version) -> str:
    if v.tx_to is None:
        return f"believed since {tx(v.tx_from)}"
    return f"believed {tx(v.tx_from)} to {tx(v.tx_to)}"


def source_of(agent: str | None, ref: str | None) -> str:
    parts = [p for p in (agent, ref) if p]
    return " ".join(parts) if parts else "unknown"


def _status(f: FactView) -> str:
    """current; superseded by the revision that replaced it; forgotten; erased (an erasure
    ends every version of a chain: a superseded one is still named as superseded)."""
    ended = None
    if f.forgotten_at is not None:
        reason = f.forget_reason or ""
        if not f.text and _ERASED_REASON.fullmatch(reason):  # ended by an erasure's receipt
            ended = f"erased {tx(f.forgotten_at)} {reason.removeprefix('erased ')}"
        else:
            ended = f"forgotten {tx(f.forgotten_at)}" + (f", {reason}" if reason else "")
    if f.superseded_by is not None:
        revised = f"superseded by {fact_id(f.superseded_by)}"
        return revised if ended is None else f"{revised}; {ended}"
    return "current" if ended is None else ended


def fact_lines(f: FactView, *, indent: str = "") -> list[str]:
    """A fact: id, subject, text, status and source, then one line per bi-temporal version."""
    origin = f"source {source_of(f.source_agent, f.source_ref)}"
    if f.supersedes is not None:
        how = "corrects" if f.revision == "correction" else "world change after"
        origin += f"; {how} {fact_id(f.supersedes)}"
    if f.reason:
        origin += f" ({f.reason})"
    if f.confidence != 1.0:
        origin += f"; confidence {f.confidence:g}"
    lines = [f"{indent}{said(f.id, f.subject, f.text)}  [{_status(f)}]  {origin}"]
    for v in f.versions:
        period = valid_period(v.valid_from, v.valid_to)
        lines.append(f"{indent}    valid {period:<24} {_believed(v)}")
    return lines


def event_line(ev: Event) -> str:
    """One event in aligned columns: seq, tx time, type, namespace, what it says."""
    columns = f"{ev.seq:>6}  {tx(ev.tx_at)}  {_event_type(ev):<10}  {ev.namespace:<8}"
    return f"{columns}  {_event_body(ev)}"


def _event_body(ev: Event) -> str:
    if isinstance(ev, FactRemembered):
        body = said(ev.seq, ev.subject, ev.text)
        if ev.valid_from is not None or ev.valid_to is not None:
            body += f" (valid {valid_period(ev.valid_from, ev.valid_to)})"
    elif isinstance(ev, FactRevised):
        body = f"{fact_id(ev.fact_id)} -> {fact_id(ev.seq)} {quote(ev.text)}"
        if ev.valid_from is not None:
            body += f" (valid {valid_period(ev.valid_from, ev.valid_to)})"
        else:
            body += " (correction)"
        if ev.reason:
            body += f" reason: {ev.reason}"
    elif isinstance(ev, FactForgotten):
        body = fact_id(ev.fact_id) + (f" reason: {ev.reason}" if ev.reason else "")
    elif isinstance(ev, EmbeddingRecorded):
        body = f"{fact_id(ev.fact_id)} {ev.model} ({ev.dims} dims)"
    elif isinstance(ev, EpisodeRecorded):
        who = ev.role + (f" {ev.speaker}" if ev.speaker else "")
        body = f"session {ev.session_id} turn {ev.turn} {who}: {quote(ev.text)}"
    elif isinstance(ev, RecallServed):
        ids = ", ".join(fact_id(i) for i in ev.hits) or "nothing"
        body = f"{quote(ev.query)} -> {ids}"
    elif isinstance(ev, FactsErased):
        body = (
            f"receipt: {ev.scope} erased, {len(ev.fact_ids)} fact version(s) "
            f"{', '.join(map(fact_id, ev.fact_ids[:20]))}{' ...' if len(ev.fact_ids) > 20 else ''}"
            f", {len(ev.episode_ids)} episode(s), {len(ev.recall_ids)} recall(s); "
            f"log before it {ev.chain_head}" + (f"; reason: {ev.reason}" if ev.reason else "")
        )
    else:  # pragma: no cover - a new event type
        body = ""
    if ev.source_agent or ev.source_ref:
        body += f"  [{source_of(ev.source_agent, ev.source_ref)}]"
    return body


def _event_type(ev: Event) -> str:
    return str(type(ev).__struct_config__.tag)


def why_lines(why: Why) -> list[str]:
    """Source, the revision chain oldest first (with valid and believed periods), the events."""
    f = why.fact
    lines = [
        f"{fact_id(f.id)} {quote(f.text)}: source {source_of(f.source_agent, f.source_ref)}, "
        f"recorded {tx(f.recorded_at)}",
        "revision chain, oldest first:",
    ]
    for link in why.chain:
        lines.extend(fact_lines(link, indent="  "))
        if link.extractor or link.derived_from:
            turns = ", ".join(f"seq {s}" for s in link.derived_from) or "-"
            lines.append(
                f"      extracted by {link.extractor or '?'} (prompt "
                f"{link.prompt_version or '?'}) from turns {turns}"
            )
    if why.episodes:
        lines.append("source turns:")
        lines += [
            f"  seq {e.seq}  session {e.session_id} turn {e.turn}  {tx(e.observed_at)}  "
            f"{e.role}{f' {e.speaker}' if e.speaker else ''}: {quote(e.text)}"
            for e in why.episodes
        ]
    if why.seen_by:
        lines.append("seen by the agent (logged recalls):")
        lines += [
            f"  seq {r.seq}  {tx(r.served_at)}  [{source_of(r.source_agent, r.source_ref)}]  "
            f"{fact_id(r.fact_id)} at rank {r.rank} for {quote(r.query)}"
            for r in why.seen_by
        ]
    lines.append("events:")
    for ev in why.events:
        lines.append(f"  seq {ev.seq}  {_event_type(ev):<10}  {tx(ev.tx_at)}  "
                     + (fact_id(ev.seq) if isinstance(ev, FactRemembered) else _short(ev)))
    return lines


def _short(ev: Event) -> str:
    if isinstance(ev, FactRevised):
        return f"{fact_id(ev.fact_id)} -> {fact_id(ev.seq)}"
    if isinstance(ev, FactsErased):  # the receipt, where the texts were
        return _event_body(ev)
    reason = getattr(ev, "reason", None)
    return fact_id(getattr(ev, "fact_id", None)) + (f" ({reason})" if reason else "")


def diff_lines(diff: Diff) -> list[str]:
    lines = [f"changes after seq {diff.since_seq} up to seq {diff.until_seq}:"]
    if diff.empty:
        return lines + ["  (none)"]
    for f in diff.added:
        lines.append(f"  added      {said(f.id, f.subject, f.text)}")
    for r in diff.revised:
        kind = "correction" if r.kind == "correction" else "world change"
        lines.append(
            f"  revised    {fact_id(r.old.id)} {quote(r.old.text)} -> "
            f"{fact_id(r.new.id)} {quote(r.new.text)} ({kind})"
        )
    for f in diff.forgotten:
        reason = f" ({f.forget_reason})" if f.forget_reason else ""
        lines.append(f"  forgotten  {fact_id(f.id)} {quote(f.text)}{reason}")
    for f in diff.erased:
        lines.append(f"  erased     {fact_id(f.id)} ({f.forget_reason})")
    return lines


def belief_lines(beliefs: Iterable[Belief]) -> list[str]:
    """One line per belief: id, subject, text, valid period, whether a change superseded it."""
    lines = [belief_line(b) for b in beliefs]
    return lines or ["(no beliefs at that point)"]


def belief_line(b: Belief) -> str:
    line = f"{said(b.id, b.subject, b.text)}  valid "
    line += valid_period(b.valid_from, b.valid_to)
    if b.superseded:
        line += "  [superseded]"
    if b.source_agent or b.source_ref:
        line += f"  [{source_of(b.source_agent, b.source_ref)}]"
    return line


def history_lines(subject: str, facts: Iterable[FactView]) -> list[str]:
    lines: list[str] = []
    for f in facts:
        lines.extend(fact_lines(f))
    return lines or [f"(no facts about {subject!r})"]
