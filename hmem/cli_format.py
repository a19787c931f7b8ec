"""Human output of the CLI (and the demo): short lines, valid times as dates, tx times in ISO.

Every function returns lines (``list[str]``) and never prints, so callers choose the stream and
the demo can indent them. Lines carry stored text as it is: whoever prints them for a person passes
each through :func:`visible` (the CLI does, in one place), so that text cannot drive the terminal;
what goes out as JSON (the MCP server's answers) passes :func:`unicode_safe`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

import msgspec

from eventlog.events import (
    EmbeddingRecorded,
    EpisodeRecorded,
    Event,
    FactForgotten,
    FactRemembered,
    FactRevised,
    RecallServed,
)

if TYPE_CHECKING:
    from eventlog.repair import RepairReport, VerifyReport
    from hmem.hits import Hit
    from hmem.recall import RecallResult
    from hmem.recall_log import LoggedRecall, RecallReplay
    from hmem.views import Belief, Diff, FactView, Stats, Version, Why
    from replay.verify import ProjectionDiff

__all__ = [
    "visible",
    "unicode_safe",
    "lone_surrogate_at",
    "day",
    "tx",
    "fact_id",
    "fact_lines",
    "event_line",
    "belief_lines",
    "recall_lines",
    "recalls_lines",
    "replay_lines",
    "why_lines",
    "diff_lines",
    "history_lines",
    "stats_lines",
    "log_verify_lines",
    "log_repair_lines",
    "projection_diff_lines",
]


# C0 controls but tab (newline and carriage return too), DEL, C1 controls, lone surrogates.
_CONTROL = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\ud800-\udfff]")
_NAMED = {"\n": "\\n", "\r": "\\r"}
_SURROGATE = re.compile("[\ud800-\udfff]")


def _escape(match: re.Match[str]) -> str:
    c = match.group()
    return _NAMED.get(c) or (f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}")


def visible(line: str) -> str:
    """``line`` safe to print for a person: control characters (escape sequences, BEL, CR, a
    newline that would fake another line, C1) and lone surrogates shown as ``\\x1b``, ``\\r``,
    ``\\n``, ``\\ud800``, so stored text cannot move the cursor, clear the screen or retitle
    the terminal. Tabs stay; text without such characters comes back unchanged."""
    return _CONTROL.sub(_escape, line)


def unicode_safe(value: Any) -> Any:
    """``value`` (a string, or JSON-like dicts and lists) with each lone surrogate in its strings
    and keys shown as ``\\udXXX``: UTF-8 cannot carry one, and the MCP SDK fails to write a
    message that holds one."""
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, dict):
        return {unicode_safe(k): unicode_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [unicode_safe(v) for v in value]
    return value


def lone_surrogate_at(value: Any) -> str | None:
    """Where in a decoded JSON value the first string or key with a lone surrogate is (e.g.
    ``params.arguments.text``, cut to 200 characters), else None. (A decoded str holds a
    surrogate only if the JSON's escape had no partner.)"""
    todo: list[tuple[str, Any]] = [("", value)]
    while todo:  # not recursive: JSON may nest as deep as Python's parser goes
        path, v = todo.pop()
        if isinstance(v, str) and _SURROGATE.search(v):
            return path.lstrip(".")[:200] or "the value"
        if isinstance(v, dict):
            todo += [(path, k) for k in v]
            todo += [(unicode_safe(f"{path}.{k}"), x) for k, x in v.items()]
        elif isinstance(v, list):
            todo += [(f"{path}[{i}]", x) for i, x in enumerate(v)]
    return None


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


def _quote(text: str) -> str:
    return '"' + text.replace("\n", " ") + '"'


def _valid(valid_from: datetime | None, valid_to: datetime | None) -> str:
    if valid_to is None:
        return f"since {day(valid_from)}"
    return f"{day(valid_from)} to {day(valid_to)}"


def _believed(v: Version) -> str:
    if v.tx_to is None:
        return f"believed since {tx(v.tx_from)}"
    return f"believed {tx(v.tx_from)} to {tx(v.tx_to)}"


def _source(agent: str | None, ref: str | None) -> str:
    parts = [p for p in (agent, ref) if p]
    return " ".join(parts) if parts else "unknown"


def _status(f: FactView) -> str:
    if f.forgotten_at is not None:
        reason = f", {f.forget_reason}" if f.forget_reason else ""
        return f"forgotten {tx(f.forgotten_at)}{reason}"
    if f.superseded_by is not None:
        return f"superseded by {fact_id(f.superseded_by)}"
    return "current"


def fact_lines(f: FactView, *, indent: str = "") -> list[str]:
    """A fact: id, subject, text, status and source, then one line per bi-temporal version."""
    origin = f"source {_source(f.source_agent, f.source_ref)}"
    if f.supersedes is not None:
        how = "corrects" if f.revision == "correction" else "world change after"
        origin += f"; {how} {fact_id(f.supersedes)}"
    if f.reason:
        origin += f" ({f.reason})"
    if f.confidence != 1.0:
        origin += f"; confidence {f.confidence:g}"
    lines = [f"{indent}{fact_id(f.id)} {f.subject}: {_quote(f.text)}  [{_status(f)}]  {origin}"]
    for v in f.versions:
        lines.append(f"{indent}    valid {_valid(v.valid_from, v.valid_to):<24} {_believed(v)}")
    return lines


def event_line(ev: Event) -> str:
    """One event in aligned columns: seq, tx time, type, namespace, what it says."""
    columns = f"{ev.seq:>6}  {tx(ev.tx_at)}  {_event_type(ev):<10}  {ev.namespace:<8}"
    return f"{columns}  {_event_body(ev)}"


def _event_body(ev: Event) -> str:
    if isinstance(ev, FactRemembered):
        body = f"{fact_id(ev.seq)} {ev.subject}: {_quote(ev.text)}"
        if ev.valid_from is not None or ev.valid_to is not None:
            body += f" (valid {_valid(ev.valid_from, ev.valid_to)})"
    elif isinstance(ev, FactRevised):
        body = f"{fact_id(ev.fact_id)} -> {fact_id(ev.seq)} {_quote(ev.text)}"
        if ev.valid_from is not None:
            body += f" (valid {_valid(ev.valid_from, ev.valid_to)})"
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
        body = f"session {ev.session_id} turn {ev.turn} {who}: {_quote(ev.text)}"
    elif isinstance(ev, RecallServed):
        ids = ", ".join(fact_id(i) for i in ev.hits) or "nothing"
        body = f"{_quote(ev.query)} -> {ids}"
    else:  # pragma: no cover - a new event type
        body = ""
    if ev.source_agent or ev.source_ref:
        body += f"  [{_source(ev.source_agent, ev.source_ref)}]"
    return body


def _event_type(ev: Event) -> str:
    return str(type(ev).__struct_config__.tag)


def recall_lines(result: RecallResult) -> list[str]:
    """Hits in rank order, one rendered line each, plus what the limit/budget left out."""
    if not result.hits:
        return ["(no matching facts)"]
    lines = [line for hit in result.hits for line in _visible_hit(hit).render().split("\n")]
    if result.omitted:
        lines.append(f"({result.omitted} more left out by --limit / --max-tokens)")
    return lines


def _visible_hit(hit: Hit) -> Hit:
    """A hit whose stored texts show their control characters: ``Hit.render`` joins a hit and
    its context turns with newlines, which then are the only ones."""
    replace = msgspec.structs.replace
    return replace(
        hit, text=visible(hit.text), subject=visible(hit.subject),
        history=tuple(replace(p, text=visible(p.text)) for p in hit.history),
        context=tuple(replace(c, text=visible(c.text), subject=visible(c.subject))
                      for c in hit.context),
    )


def why_lines(why: Why) -> list[str]:
    """Source, the revision chain oldest first (with valid and believed periods), the events."""
    f = why.fact
    lines = [
        f"{fact_id(f.id)} {_quote(f.text)}: source {_source(f.source_agent, f.source_ref)}, "
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
        for e in why.episodes:
            who = e.role + (f" {e.speaker}" if e.speaker else "")
            lines.append(
                f"  seq {e.seq}  session {e.session_id} turn {e.turn}  {tx(e.observed_at)}  "
                f"{who}: {_quote(e.text)}"
            )
    if why.seen_by:
        lines.append("seen by the agent (logged recalls):")
        for seen in why.seen_by:
            lines.append(
                f"  seq {seen.seq}  {tx(seen.served_at)}  "
                f"[{_source(seen.source_agent, seen.source_ref)}]  {fact_id(seen.fact_id)} at "
                f"rank {seen.rank} for {_quote(seen.query)}"
            )
    lines.append("events:")
    for ev in why.events:
        lines.append(f"  seq {ev.seq}  {_event_type(ev):<10}  {tx(ev.tx_at)}  "
                     + (fact_id(ev.seq) if isinstance(ev, FactRemembered) else _short(ev)))
    return lines


def recalls_lines(logged: list[LoggedRecall]) -> list[str]:
    """One line per logged recall: seq, time, caller, query, the ids it returned."""
    if not logged:
        return ["(no logged recalls: turn logging on with `hmem mcp --log-recalls`, "
                "Memory(log_recalls=True) or HMEM_LOG_RECALLS=1)"]
    return [
        f"seq {r.seq}  {tx(r.served_at)}  [{_source(r.source_agent, r.source_ref)}]  "
        f"{_quote(r.query)} -> " + (", ".join(fact_id(h.id) for h in r.hits) or "nothing")
        for r in logged
    ]


def replay_lines(replay: RecallReplay) -> list[str]:
    """The logged hits beside the replayed ones, and whether they agree."""
    r = replay.recall
    lines = [f"recall seq {r.seq}  {tx(r.served_at)}  {_quote(r.query)}"]
    if replay.same:
        lines.append("replayed: the same hits in the same order")
    else:
        lines.append(f"replayed DIFFERENTLY: {replay.differences}")
    lines.append(f"  {'rank':>4}  {'logged':>18}  {'replayed':>18}")
    for i in range(max(len(r.hits), len(replay.replayed))):
        was = r.hits[i] if i < len(r.hits) else None
        now = replay.replayed[i] if i < len(replay.replayed) else None
        cell = [f"{fact_id(h.id)} {h.score:.4g}" if h else "-" for h in (was, now)]
        lines.append(f"  {i + 1:>4}  {cell[0]:>18}  {cell[1]:>18}")
    return lines


def _short(ev: Event) -> str:
    if isinstance(ev, FactRevised):
        return f"{fact_id(ev.fact_id)} -> {fact_id(ev.seq)}"
    reason = getattr(ev, "reason", None)
    return fact_id(getattr(ev, "fact_id", None)) + (f" ({reason})" if reason else "")


def diff_lines(diff: Diff) -> list[str]:
    lines = [f"changes after seq {diff.since_seq} up to seq {diff.until_seq}:"]
    if diff.empty:
        return lines + ["  (none)"]
    for f in diff.added:
        lines.append(f"  added      {fact_id(f.id)} {f.subject}: {_quote(f.text)}")
    for r in diff.revised:
        kind = "correction" if r.kind == "correction" else "world change"
        lines.append(
            f"  revised    {fact_id(r.old.id)} {_quote(r.old.text)} -> "
            f"{fact_id(r.new.id)} {_quote(r.new.text)} ({kind})"
        )
    for f in diff.forgotten:
        reason = f" ({f.forget_reason})" if f.forget_reason else ""
        lines.append(f"  forgotten  {fact_id(f.id)} {_quote(f.text)}{reason}")
    return lines


def belief_lines(beliefs: Iterable[Belief]) -> list[str]:
    """One line per belief: id, subject, text, valid period, whether a change superseded it."""
    lines = [
        f"{fact_id(b.id)} {b.subject}: {_quote(b.text)}  valid {_valid(b.valid_from, b.valid_to)}"
        + ("  [superseded]" if b.superseded else "")
        + (f"  [{_source(b.source_agent, b.source_ref)}]" if b.source_agent or b.source_ref else "")
        for b in beliefs
    ]
    return lines or ["(no beliefs at that point)"]


def history_lines(subject: str, facts: Iterable[FactView]) -> list[str]:
    lines: list[str] = []
    for f in facts:
        lines.extend(fact_lines(f))
    return lines or [f"(no facts about {subject!r})"]


def stats_lines(s: Stats) -> list[str]:
    span = f"{tx(s.first_tx)} to {tx(s.last_tx)}" if s.first_tx else "-"
    mode = "read-only" if s.read_only else f"writer, fsync {s.fsync}"
    return [
        f"store       {s.path} ({mode})",
        f"namespace   {s.namespace}",
        f"facts       {s.facts} ({s.current} current, {s.superseded} superseded, "
        f"{s.forgotten} forgotten)",
        f"subjects    {s.subjects}, entities {s.entities}, vectors {s.vectors}"
        + (f" ({s.embedding_backlog} facts waiting to be embedded)" if s.embedding_backlog
           else ""),
        *([f"embedding   failed: {s.embedding_error}"] if s.embedding_error else []),
        f"events      {s.namespace_events} in namespace",
        f"tx time     {span}",
        f"log head    {s.head}  (note it; `hmem log verify --expect` checks it later)",
        f"projection  at seq {s.projection_seq}",
    ]


def log_verify_lines(report: VerifyReport, root: object) -> list[str]:
    if report.segment is not None:  # a damaged record
        return [
            f"corrupted: {report.problem} in {report.segment} at byte {report.offset}",
            f"{report.events} events before it read fine (head {report.head}); "
            f"`hmem --path {root} log repair` cuts the log back (with a backup)",
        ]
    lines = [f"{'ok' if report.ok else 'FAILED'}: {report.events} events in {report.segments} "
             f"segment(s), {report.bytes} bytes; head {report.head}"]
    if report.expected:
        lines.append(f"expected head {report.expected}: " + (report.problem or "the log holds it"))
    if report.checkpoints or report.witness_problems:
        lines.append(f"{report.checkpoints} signed checkpoint(s) checked")
        lines += [f"witness: {problem}" for problem in report.witness_problems]
    return lines + ([f"note: {report.torn_tail}"] if report.torn_tail else [])


def log_repair_lines(report: RepairReport) -> list[str]:
    if not report.cuts:
        return [f"nothing to repair: the log is intact ({report.events_kept} events)"]
    lines = [f"cut {cut}" for cut in report.cuts]
    lines.append(f"backup of the cut bytes: {report.backup}")
    return lines + [f"kept {report.events_kept} events"]


def projection_diff_lines(report: ProjectionDiff) -> list[str]:
    if report.ok:
        return [f"ok: the projection matches a replay of {report.events} events"]
    lines = [
        f"{table}: {missing} rows missing, {extra} unexpected"
        for table, (missing, extra) in report.tables.items()
    ]
    lines += [f"  {ex}" for ex in report.examples]
    return lines + ["`hmem replay rebuild` rebuilds the projection from the log"]
