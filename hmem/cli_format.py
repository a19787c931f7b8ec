"""Human output of the CLI (and the demo): short lines, valid times as dates, tx times in ISO.

Every function returns lines (``list[str]``) and never prints, so callers choose the stream and
the demo can indent them.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from eventlog.events import (
    EmbeddingRecorded,
    EpisodeRecorded,
    Event,
    FactForgotten,
    FactRemembered,
    FactRevised,
)

if TYPE_CHECKING:
    from eventlog.repair import RepairReport, VerifyReport
    from hmem.recall import RecallResult
    from hmem.views import Diff, FactView, Stats, Version, Why
    from replay.verify import ProjectionDiff

__all__ = [
    "day",
    "tx",
    "fact_id",
    "fact_lines",
    "event_line",
    "recall_lines",
    "why_lines",
    "diff_lines",
    "history_lines",
    "stats_lines",
    "log_verify_lines",
    "log_repair_lines",
    "projection_diff_lines",
]


def day(dt: datetime | None) -> str:
    """A valid (world) time as YYYY-MM-DD."""
    return "?" if dt is None else dt.astimezone(timezone.utc).date().isoformat()


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
    lines = [hit.render() for hit in result.hits]
    if result.omitted:
        lines.append(f"({result.omitted} more left out by --limit / --max-tokens)")
    return lines


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
    lines.append("events:")
    for ev in why.events:
        lines.append(f"  seq {ev.seq}  {_event_type(ev):<10}  {tx(ev.tx_at)}  "
                     + (fact_id(ev.seq) if isinstance(ev, FactRemembered) else _short(ev)))
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
        f"subjects    {s.subjects}, entities {s.entities}, vectors {s.vectors}",
        f"events      {s.namespace_events} in namespace, {s.log_events} in log",
        f"tx time     {span}",
        f"log         {s.log_bytes} bytes in {s.log_segments} segment(s); "
        f"projection at seq {s.projection_seq}",
    ]


def log_verify_lines(report: VerifyReport, root: object) -> list[str]:
    if report.ok:
        lines = [
            f"ok: {report.events} events in {report.segments} segment(s), {report.bytes} bytes"
        ]
        return lines + ([f"note: {report.torn_tail}"] if report.torn_tail else [])
    return [
        f"corrupted: {report.problem} in {report.segment} at byte {report.offset}",
        f"{report.events} events before it read fine; "
        f"`hmem --path {root} log repair` cuts the log back (with a backup)",
    ]


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
