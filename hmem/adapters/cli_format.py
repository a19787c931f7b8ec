"""Human output of the CLI (and the demo): short lines, valid times as dates, tx times in ISO.

Every function returns lines (``list[str]``) and never prints, so callers choose the stream and
the demo can indent them. Lines carry stored text as it is: whoever prints them for a person passes
each through :func:`visible` (the CLI does, in one place), so that text cannot drive the terminal;
what goes out as JSON (the MCP server's answers) passes :func:`unicode_safe`.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import msgspec

from hmem.recall.logged import replay_lines
from hmem.views import stats_lines
from projections.printable import json_visible, visible
from replay.views import (
    belief_lines,
    day,
    diff_lines,
    event_line,
    fact_id,
    fact_lines,
    history_lines,
    tx,
    why_lines,
)

if TYPE_CHECKING:
    from eventlog.repair import RepairReport, VerifyReport
    from hmem.recall.hits import Hit
    from hmem.recall.logged import LoggedRecall
    from hmem.recall.request import RecallResult
    from replay.verify import ProjectionDiff

__all__ = [
    "visible",
    "json_visible",
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


_SURROGATE = re.compile("[\ud800-\udfff]")


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


def recall_lines(result: RecallResult) -> list[str]:
    """Hits in rank order, one rendered line each, plus what the limit/budget left out."""
    shown = msgspec.structs.replace(result, hits=tuple(_visible_hit(h) for h in result.hits))
    return shown.lines(limits="--limit / --max-tokens")


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


def recalls_lines(logged: list[LoggedRecall]) -> list[str]:
    """One line per logged recall: seq, time, caller, query, the ids it returned."""
    if not logged:
        return ["(no logged recalls: turn logging on with `hmem mcp --log-recalls`, "
                "Memory(log_recalls=True) or HMEM_LOG_RECALLS=1)"]
    return [r.render() for r in logged]


def log_verify_lines(report: VerifyReport, root: object) -> list[str]:
    """``root``: the store's directory, named in the repair command (a store on a server is
    named by ``report.table``, never by its URL)."""
    if report.segment is not None and report.table is not None:  # a damaged row on a server
        return [
            f"corrupted: {report.problem} in {report.table} at seq {report.offset}",
            f"{report.events} events before it read fine (head {report.head}); a log on a "
            f"server is not cut back (`hmem log repair` is for a store directory): restore the "
            f"database from a backup taken before it",
        ]
    if report.segment is not None:  # a damaged record
        return [
            f"corrupted: {report.problem} in {report.segment} at byte {report.offset}",
            f"{report.events} events before it read fine (head {report.head}); "
            f"`hmem --path {root} log repair` cuts the log back (with a backup)",
        ]
    where = report.table if report.table is not None else f"{report.segments} segment(s)"
    lines = [f"{'ok' if report.ok else 'FAILED'}: {report.events} events in {where}, "
             f"{report.bytes} bytes; head {report.head}"]
    lines += [f"problem: {problem}" for problem in report.table_problems]
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
    notes = [f"note: {note}" for note in report.notes]
    if report.ok:
        return [f"ok: the projection matches a replay of {report.events} events", *notes]
    lines = [
        f"{table}: {missing} rows missing, {extra} unexpected"
        for table, (missing, extra) in report.tables.items()
    ]
    lines += [f"  {ex}" for ex in report.examples]
    return lines + notes + ["`hmem replay rebuild` rebuilds the projection from the log"]
