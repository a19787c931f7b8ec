"""``hmem mcp``: a stdio MCP server over one open :class:`~hmem.memory.Memory`.

A thin adapter, in-process: each tool validates its arguments (JSON schema from the type hints
below), calls one library method and answers with readable text (the CLI's formatting) plus
structured content (ids, dates, sources). An :class:`~hmem.errors.HmemError` becomes a tool
error (``isError``) whose message says what to do; the server keeps running.
Over stdio every request is answered: a line the SDK's reader would drop in silence (a lone
surrogate, a raw control character, not UTF-8, nested too deep) is answered by
:mod:`hmem.adapters.mcp_stdio`;
no answer carries a lone surrogate back out (:func:`hmem.adapters.cli_format.unicode_safe`).

Built on the official ``mcp`` SDK (``pip install 'hmem[mcp]'``), its ``MCPServer`` (mcp 2.x) or
``FastMCP`` (mcp 1.x) API.
"""

from __future__ import annotations

import functools
import inspect
import signal
import sys
import threading
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Annotated, Any

import msgspec

from hmem.adapters import cli_format as fmt
from hmem.adapters.mcp_stdio import (
    BeforeValidator,
    CallToolResult,
    Field,
    Server,
    StdioServer,
    TextContent,
    ToolAnnotations,
    error_result,
)
from hmem.adapters.usage import UsageLog
from hmem.errors import FactNotFound, HmemError
from hmem.memory import Memory
from hmem.time.iso import MAX_TIME_CHARS
from hmem.version import __version__
from hmem.views import plain_int

__all__ = ["build_server", "serve", "TOOLS", "WRITE_TOOLS"]

WRITE_TOOLS = ("remember", "revise", "forget", "consolidate", "erase")
TOOLS = ("remember", "recall", "revise", "forget", "why", "diff", "history", "stats",
         "consolidate", "erase")

# ---------------------------------------------------------------------------- argument types


def _not_bool(value: Any) -> Any:
    """JSON's true and false are not numbers (pydantic would read them as 1 and 0)."""
    if isinstance(value, bool):
        raise ValueError("a number is needed, not true or false")
    return value


NotBool = BeforeValidator(_not_bool)

FactId = Annotated[int, Field(
    ge=1, description="A fact id: the number shown as [#n] by recall.",
), NotBool]
Subject = Annotated[str, Field(
    min_length=1, max_length=200,
    description="Who or what the fact is about, as a short name: 'user', 'maya', 'project "
    "atlas'. Reuse the same name for the same thing.",
)]
Statement = Annotated[str, Field(
    min_length=1, max_length=4000,
    description="One self-contained statement that makes sense without this conversation "
    "(names, not pronouns), e.g. 'Maya lives in Paris'.",
)]
When = Annotated[str | None, Field(
    max_length=MAX_TIME_CHARS,
    description="A date or time in ISO 8601 ('2025-03-01', '2025-03-01T09:30:00Z'; a time "
    f"needs a zone) or spoken, in UTC ('yesterday 14:02', '3 days ago', 'last week'); at most "
    f"{MAX_TIME_CHARS} characters.",
)]
TimeText = Annotated[str, Field(max_length=MAX_TIME_CHARS)]  # a time string, bounded as When
TxPoint = Annotated[int | TimeText | None, Field(
    description="A point in memory's own timeline: an ISO 8601 time ('2025-03-01T12:00:00Z'), "
    "a spoken one ('yesterday 14:02', '2 hours ago') or a seq number (every write result "
    f"carries one); a time is at most {MAX_TIME_CHARS} characters.",
), NotBool]
Reason = Annotated[str | None, Field(max_length=500, description="Why, in a few words.")]
SourceRef = Annotated[str | None, Field(
    max_length=200,
    description="Where this came from, so `why` can answer later: e.g. 'user, chat "
    "2025-06-01', 'meeting notes 2025-05-30', 'issue #42'.",
)]
Confidence = Annotated[float, Field(
    ge=0.0, le=1.0, description="How sure you are, 0 to 1 (1: the user said so).",
), NotBool]
Entities = Annotated[list[Annotated[str, Field(min_length=1, max_length=200)]] | None, Field(
    max_length=50,
    description="Names the fact mentions (people, places, projects); default: its proper nouns.",
)]
RequestId = Annotated[str | None, Field(
    max_length=200,
    description="Optional: a name of your choice for this write (e.g. a UUID). Send the same "
    "one when you retry a call that failed or timed out: the write is then made only once.",
)]
Limit = Annotated[int, Field(ge=1, le=50, description="At most this many facts."), NotBool]
# The recall tool's default: BEAM's ten hits keep .471 / .556 of .479 / .556 within 4,000 tokens
# without / with the local embedder; LoCoMo's all from 1,000 (docs/reference.md, "Recall", 6).
RECALL_BUDGET = 4000
MaxTokens = Annotated[int, Field(
    ge=50, le=20000, description="Token budget for all returned facts (~4 characters a token; "
    "default 4,000: ten long conversation turns fit, 1,000 keeps one or two).",
), NotBool]
Query = Annotated[str, Field(
    min_length=1, max_length=2000,
    description="What you want to know, in words: 'where does maya live', 'user's diet'.",
)]

# ---------------------------------------------------------------------------- descriptions

INSTRUCTIONS = """\
hmem is your long-term memory: facts, preferences and decisions that outlive this conversation,
with when each was true and where it came from. Recall before answering anything about the user
or past work; remember durable facts with their source; revise (never forget-and-remember) when
something changed or was wrong; forget only when the user asks. Every fact has an id [#n]."""

DESCRIPTIONS = {
    "remember": """\
Store a durable fact, preference or decision so it survives this conversation.

Use it when the user tells you something about themselves, people, their work or their world
that will matter later ("I'm vegetarian", "Maya moved to Paris", "we chose Postgres for
billing"), or when a decision is made. One self-contained statement per call. Give source_ref
(who said it, where, when) so `why` can answer later; give valid_from when it became true at a
known date. Recall first: if a stored fact says something else about the same thing, `revise` it
instead of remembering a second version. Do not store small talk, secrets or passing details.""",
    "recall": """\
Search long-term memory. Call it BEFORE answering anything about the user, their preferences,
people, projects or past work and decisions, and before `remember` (to find a fact to revise).

Returns current beliefs best first, each with its id [#n], when it was true, and the earlier
versions it replaced. as_of asks what you believed at an earlier point of memory's timeline;
valid_at what was true in the world on a date. No hits means nothing is stored: say so rather
than guess. max_tokens (default 4,000) caps the text returned: ask for less to save context.""",
    "revise": """\
Replace a stored fact with a new version when something changed or was wrong. Never forget and
re-remember instead: revise keeps the history linked, so `why` and `diff` can explain it.

Two kinds:
- The world changed ("Maya moved to Paris in March"): pass valid_from = when the new statement
  became true. The old fact stays true for the time before it.
- A correction (the old statement was never right: misheard, a typo): omit valid_from. The old
  statement is no longer believed at all.
Use the id from recall; only the newest version of a fact can be revised (the error names it).""",
    "forget": """\
Stop believing a fact. Only when the user explicitly asks you to forget or delete something.

Not for facts that changed or were wrong: use `revise`. The fact leaves recall from now on;
`history` and `why` still show it, as forgotten, with the reason.""",
    "consolidate": """\
Tidy memory: list what it could do without (duplicates of a current fact, facts a newer one
repeats with one word changed, which it ends where the newer one starts, old episodic facts no
recall used), each with an id.

Proposes only. Show the proposals to the user; forget what they approve by passing those ids in
`accept` (or `apply_all` when they approve everything). Each becomes a forget with a reason that
`why` shows.""",
    "erase": """\
Erase for real: only when the user explicitly asks that something be erased or deleted for good
(e.g. a privacy request), never to tidy up or correct (use `forget` or `revise`). Unlike forget,
the text cannot be read back by anyone afterwards.

Name one of `fact` (an id: all its versions), `subject` (everything about it) or `session` (its
turns and the facts derived from them). Without `confirm` it only shows what would be erased:
show that to the user and call again with `confirm` once they agree. Returns the receipt.""",
    "why": """\
How you know a fact: its source (agent and reference), when it was recorded, and its whole
revision chain with the events behind it. Use it when asked "how do you know that?", "where did
that come from?", or before relying on a surprising fact.""",
    "diff": """\
What changed in memory between two points of its timeline: facts added, revised (world change
or correction) and forgotten. Use it when asked "what changed since ...?", "what did you learn
this week?", or to catch up at the start of a session. since is exclusive, until inclusive
(default: now); `stats` gives the current time and seq.""",
    "history": """\
Every fact ever stored about one subject, oldest first, including replaced and forgotten
versions, with when each was true and when it was believed. Use it when asked how something
evolved ("where has Maya lived?"), or to find a fact that recall no longer returns.""",
    "stats": """\
Counts for this memory (current, replaced and forgotten facts, subjects, events), the store's
path and namespace, the current time and seq, and whether it is read-only. Use it when asked
how much you remember or where your memory lives.""",
}

# ---------------------------------------------------------------------------- results


def _data(value: Any) -> Any:
    """Plain JSON values (datetimes as RFC 3339 strings) from Structs, tuples and dicts."""
    return msgspec.json.decode(msgspec.json.encode(value, enc_hook=plain_int))


def _ok(lines: list[str], data: dict[str, Any]) -> CallToolResult:
    # By the wire names (camelCase), which every SDK version accepts.
    return CallToolResult.model_validate({
        "content": [TextContent(type="text", text=fmt.unicode_safe("\n".join(lines)))],
        "structuredContent": fmt.unicode_safe(data),
    })


def _error(e: HmemError) -> CallToolResult:
    message = str(e) or type(e).__name__
    if isinstance(e, FactNotFound):
        message = (
            f"no fact {e.fact_id!r} in this memory (namespace {e.namespace!r}); find the right "
            "id with recall or history"
        )
    return CallToolResult.model_validate(error_result(type(e).__name__, message))


def _blank(value: str | None) -> str | None:
    """Models often send "" for an argument they mean to leave out."""
    return None if value is None or not value.strip() else value


def _tx(value: int | str | None) -> int | str | None:
    if isinstance(value, str):
        text = value.strip().lstrip("#")
        if text.isascii() and text.isdigit() and len(text) <= 19:
            return int(text)
        return _blank(value)  # a time, or the library names the problem
    return value


def _event(ev: Any) -> dict[str, Any]:
    """An event without its payload (no vectors, no text): what happened, when, from where."""
    return {
        "seq": ev.seq,
        "type": str(type(ev).__struct_config__.tag),
        "tx_at": _data(ev.tx_at),
        "fact_id": getattr(ev, "fact_id", ev.seq),
        "source_agent": ev.source_agent,
        "source_ref": ev.source_ref,
        "reason": getattr(ev, "reason", None),
    }


# ---------------------------------------------------------------------------- the server


def build_server(
    memory: Memory,
    *,
    usage: UsageLog | None = None,
    source_agent: str = "mcp",
    clock: Callable[[], datetime] | None = None,
) -> Any:
    """An MCP server whose tools call ``memory``. A read-only Memory gets no write tools."""
    read_only = memory.read_only
    now = clock or (lambda: datetime.now(timezone.utc))
    instructions = INSTRUCTIONS + (
        "\nThis memory is read-only here: you can recall and explain, not change it."
        if read_only else ""
    )
    options: dict[str, Any] = {"instructions": instructions, "log_level": "WARNING"}
    if "version" in inspect.signature(Server).parameters:  # mcp >= 2
        options["version"] = __version__
    server = StdioServer("hmem", **options)

    warned = False

    def note(op: str, ok: bool) -> None:
        """Record a call in the usage log; a failing log warns once, never fails a call."""
        nonlocal warned
        if usage is None:
            return
        try:
            usage.record(op, ok=ok)
        except OSError as e:
            if not warned:
                warned = True
                print(fmt.visible(f"hmem mcp: cannot write the usage log {usage.path}: {e}"),
                      file=sys.stderr)

    Tool = Callable[..., CallToolResult]

    def tool(name: str, *, destructive: bool = False) -> Callable[[Tool], Tool]:
        read = name not in WRITE_TOOLS

        def register(fn: Tool) -> Tool:
            @functools.wraps(fn)  # the SDK reads the schema from fn's signature
            def run(**kwargs: Any) -> CallToolResult:
                ok = False
                try:
                    result = fn(**kwargs)
                    ok = True
                    return result
                except HmemError as e:
                    return _error(e)
                finally:
                    note(name, ok)

            if read or not read_only:
                server.tool_arguments = {
                    **server.tool_arguments, name: tuple(inspect.signature(fn).parameters),
                }
                server.add_tool(
                    run, name=name, description=DESCRIPTIONS[name],
                    annotations=ToolAnnotations.model_validate({
                        "readOnlyHint": read, "destructiveHint": destructive,
                        "idempotentHint": read, "openWorldHint": False,
                    }),
                )
            return fn
        return register

    server.refused = lambda name: note(name, False) if name in TOOLS else None

    @tool("remember")
    def remember(
        subject: Subject,
        text: Statement,
        source_ref: SourceRef = None,
        valid_from: When = None,
        valid_to: When = None,
        confidence: Confidence = 1.0,
        entities: Entities = None,
        request_id: RequestId = None,
    ) -> CallToolResult:
        new = memory.remember(
            subject, text, valid_from=_blank(valid_from), valid_to=_blank(valid_to),
            confidence=confidence, entities=entities or (), source_agent=source_agent,
            source_ref=_blank(source_ref), request_id=request_id,
        )
        fact = memory.get(new)
        head = {
            "new": f"remembered {fmt.fact_id(new)}",
            "repeat": f"already remembered as {fmt.fact_id(new)} (same subject and text, still "
                      "believed): nothing stored",
            "retry": f"already remembered as {fmt.fact_id(new)} (this request was made "
                     "before): nothing stored",
        }[new.outcome]
        return _ok([head, *fmt.fact_lines(fact)], {
            "id": int(new), "seq": int(new), "repeat": not new.new, "outcome": new.outcome,
            "fact": _data(fact),
        })

    @tool("recall")
    def recall(
        query: Query,
        limit: Limit = 10,
        max_tokens: MaxTokens = RECALL_BUDGET,
        subject: Annotated[str | None, Field(
            max_length=200, description="Only facts about this subject.")] = None,
        as_of: TxPoint = None,
        valid_at: When = None,
        source_ref: SourceRef = None,
    ) -> CallToolResult:
        result = memory.recall(
            query, limit=limit, max_tokens=max_tokens, subject=_blank(subject),
            as_of=_tx(as_of), valid_at=_blank(valid_at), source_agent=source_agent,
            source_ref=_blank(source_ref),
        )
        return _ok(result.lines(), _data(result))

    @tool("revise")
    def revise(
        id: FactId,
        text: Statement,
        valid_from: Annotated[str | None, Field(
            max_length=MAX_TIME_CHARS,
            description="When the new statement became true (ISO 8601, e.g. '2026-03-01'): the "
            "world changed then. Omit for a correction of a statement that was never right.",
        )] = None,
        reason: Reason = None,
        source_ref: SourceRef = None,
        valid_to: When = None,
        subject: Annotated[str | None, Field(
            max_length=200, description="Move the fact to another subject.")] = None,
        confidence: Confidence = 1.0,
        request_id: RequestId = None,
    ) -> CallToolResult:
        vf = _blank(valid_from)
        new = memory.revise(
            id, text, valid_from=vf, valid_to=_blank(valid_to), subject=_blank(subject),
            confidence=confidence, reason=_blank(reason), source_agent=source_agent,
            source_ref=_blank(source_ref), request_id=request_id,
        )
        kind = "world" if vf is not None else "correction"
        fact, old = memory.get(new), memory.get(id)
        if kind == "world":
            how = f"the world changed; {fmt.fact_id(id)} stays true before " + fmt.day(
                fact.versions[0].valid_from)
        else:
            how = f"a correction; {fmt.fact_id(id)} is no longer believed"
        summary = f"revised {fmt.fact_id(id)} -> {fmt.fact_id(new)}: {how}"
        if new.outcome == "retry":
            summary += " (this request was made before: nothing stored)"
        return _ok([summary, *fmt.fact_lines(fact)],
                   {"id": int(new), "seq": int(new), "revises": id, "kind": kind,
                    "outcome": new.outcome, "fact": _data(fact), "previous": _data(old)})

    @tool("forget", destructive=True)
    def forget(id: FactId, reason: Reason = None, request_id: RequestId = None) -> CallToolResult:
        seq = memory.forget(id, reason=_blank(reason), source_agent=source_agent,
                            request_id=request_id)
        fact = memory.get(id)
        again = " (this request was made before)" if seq.outcome == "retry" else ""
        return _ok([f"forgot {fmt.fact_id(id)} (log seq {seq}){again}; history and why still "
                    f"show it", *fmt.fact_lines(fact)],
                   {"id": id, "seq": int(seq), "outcome": seq.outcome, "fact": _data(fact)})

    @tool("consolidate", destructive=True)
    def consolidate(
        accept: Annotated[list[Annotated[str, Field(max_length=100)]] | None, Field(
            max_length=1000, description="Proposal ids to apply (from an earlier call).")] = None,
        apply_all: Annotated[bool, Field(description="Apply every proposal.")] = False,
    ) -> CallToolResult:
        report = memory.consolidate(apply=apply_all, accept=accept or ())
        return _ok(report.lines(), _data(report))

    @tool("erase", destructive=True)
    def erase(
        fact: Annotated[int | None, Field(ge=1, description="A fact id (from recall).")] = None,
        subject: Annotated[str | None, Field(
            max_length=200, description="A subject: every fact about it.")] = None,
        session: Annotated[str | None, Field(
            max_length=200, description="A session id: its turns and what was derived from them.",
        )] = None,
        reason: Reason = None,
        confirm: Annotated[bool, Field(
            description="Erase; without it, only show what would be erased.")] = False,
    ) -> CallToolResult:
        receipt = memory.erase(fact=fact, subject=_blank(subject), session=_blank(session),
                               reason=_blank(reason), by=source_agent, dry_run=not confirm)
        return _ok(receipt.lines(), _data(receipt))

    @tool("why")
    def why(id: FactId) -> CallToolResult:
        result = memory.why(id)
        return _ok(fmt.why_lines(result), {
            "fact": _data(result.fact), "chain": _data(result.chain),
            "events": [_event(ev) for ev in result.events],
            "episodes": _data(result.episodes),
        })

    @tool("diff")
    def diff(
        since: Annotated[int | TimeText, Field(
            description="Start, exclusive: an ISO 8601 time ('2025-03-01T00:00:00Z', "
            "'2025-03-01'), a spoken one ('yesterday', '2 hours ago') or a seq number; a time "
            f"is at most {MAX_TIME_CHARS} characters.")],
        until: TxPoint = None,
    ) -> CallToolResult:
        start = _tx(since)
        if start is None:
            start = since  # let the library name the problem
        result = memory.diff(start, _tx(until))
        return _ok(fmt.diff_lines(result), _data(result))

    @tool("history")
    def history(subject: Subject) -> CallToolResult:
        facts = memory.history(subject)
        return _ok(fmt.history_lines(subject, facts), {"subject": subject, "facts": _data(facts)})

    @tool("stats")
    def stats() -> CallToolResult:
        result = memory.stats()
        at = now()
        return _ok([*fmt.stats_lines(result), f"now         {fmt.tx(at)}, seq {result.head_seq}"],
                   {**_data(result), "now": _data(at), "seq": result.head_seq})

    return server


def serve(
    memory: Memory, *, usage_log: bool = False, source_agent: str = "mcp"
) -> None:
    """Serve ``memory`` over stdio until the client closes stdin or the process gets SIGTERM.
    The caller closes ``memory`` (which finishes its background embeddings): a SIGTERM ends
    the server like a closed stdin, so that close runs."""
    usage = UsageLog(memory.path) if usage_log else None
    server = build_server(memory, usage=usage, source_agent=source_agent)
    mode = "read-only" if memory.read_only else "writer"
    where = memory.store.shown  # a directory, or the server's URL without its password
    print(fmt.visible(f"hmem mcp: serving {where} namespace {memory.namespace!r} ({mode})"
                      + (f", usage log {usage.path}" if usage else "")), file=sys.stderr)
    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _terminated) if main else None
    try:
        server.run("stdio")
    finally:
        if main:
            signal.signal(signal.SIGTERM, previous)


def _terminated(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)  # unwinds to the caller's close()
