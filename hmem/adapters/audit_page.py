"""The auditor's page (``hmem ui``): a read-only web page over one store, server-rendered HTML
on the ASGI stack the MCP SDK brings (starlette; uvicorn serves it), no script, no build step.

It answers an audit's four questions through the public library only: what did the agent
believe about X at T (``/``: recall with ``as_of`` / ``valid_at``, a subject's history and its
beliefs then), what changed since (``/diff``), who told it (``/fact/<id>``: ``why`` with the
provenance, the revision chain as a bi-temporal timeline, the events and erasure receipts), and
what was it shown when it answered (``/recalls``, ``/recall/<seq>``: logged recalls and their
replay). ``?ns=`` picks the namespace. Every stored or user-given text is shown through
:func:`projections.printable.visible` (control and bidi characters as escapes), then
``html.escape``; the pages carry a Content-Security-Policy that allows no script at all.
A library error (:class:`~hmem.errors.HmemError`) is a page with status 400 (404 for something
not there), never a traceback. Needs starlette (``pip install '.[mcp]'``)."""

from __future__ import annotations

import html
import threading
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.routing import Route

from eventlog.events import Event, FactForgotten, FactRemembered, FactRevised, FactsErased
from hmem.adapters.cli_commands import tx_point
from hmem.adapters.listening import LOOPBACK_HOSTS, is_loopback
from hmem.errors import FactNotFound, HmemError
from projections.printable import visible
from replay.views import day, source_of, tx

if TYPE_CHECKING:
    from hmem.memory import Memory
    from hmem.views import FactView

__all__ = ["audit_app"]

_KEPT_VIEWS = 64
_HEADERS = {
    # no script may run on these pages, whatever a stored text holds
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; "
                               "form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
header{background:#1d2330;color:#fff;padding:.6em 1.2em;display:flex;gap:1.4em;align-items:center}
header a{color:#cfe0ff;text-decoration:none}header b{font-size:1.1em}
main{padding:1em 1.4em;max-width:1200px}
h1{font-size:1.3em;margin:.2em 0 .6em}h2{font-size:1.08em;margin:1.3em 0 .4em}
table{border-collapse:collapse;background:#fff;width:100%;margin:.3em 0}
th,td{border:1px solid #d8dce3;padding:.3em .5em;text-align:left;vertical-align:top}
th{background:#eef1f5;font-weight:600}
form{background:#fff;border:1px solid #d8dce3;padding:.7em;display:flex;flex-wrap:wrap;gap:.7em}
label{display:flex;flex-direction:column;font-size:.85em;color:#555}
input{font:inherit;padding:.25em .4em;min-width:11em}button{font:inherit;padding:.3em 1em}
.err{background:#fde8e8;border:1px solid #e0a0a0;padding:.7em;color:#8a1c1c}
.muted{color:#777}.erased{color:#a33;font-weight:600}.now{color:#17702f;font-weight:600}
.old{color:#8a6d00}.gone{color:#a33}code{background:#eef1f5;padding:0 .2em}
"""


# ---------------------------------------------------------------------------- HTML pieces


def esc(value: object) -> str:
    """Any text for the page: control and bidi characters as visible escapes, then escaped."""
    return html.escape(visible("" if value is None else str(value)))


def shown_text(text: str) -> str:
    """A stored fact text; an erased one (the only empty text) as ``[erased]``."""
    return esc(text) if text else '<span class="erased">[erased]</span>'


def when(dt: datetime | None, *, open_end: str = "") -> str:
    return open_end if dt is None else esc(tx(dt))


def link(path: str, label: str, ns: str, **params: object) -> str:
    query = urlencode({"ns": ns, **{k: v for k, v in params.items() if v not in (None, "")}})
    return f'<a href="{html.escape(path)}?{html.escape(query)}">{label}</a>'


def fact_link(fid: int | None, ns: str) -> str:
    return "-" if fid is None else link(f"/fact/{fid}", f"#{fid}", ns)


def table(heads: Iterable[str], rows: Iterable[Iterable[str]], empty: str = "(none)") -> str:
    """A table of already-escaped cells."""
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    if not body:
        return f'<p class="muted">{esc(empty)}</p>'
    head = "".join(f"<th>{esc(h)}</th>" for h in heads)
    return f"<table><tr>{head}</tr>{body}</table>"


def form(action: str, ns: str, fields: Iterable[tuple[str, str, str, str]]) -> str:
    """A GET form: (name, label, value, placeholder) per input, and the namespace."""
    inputs = "".join(
        f'<label>{esc(label)}<input name="{name}" value="{esc(value)}" '
        f'placeholder="{esc(hint)}"></label>'
        for name, label, value, hint in fields
    )
    return (f'<form method="get" action="{action}">{inputs}<label>namespace<input name="ns" '
            f'value="{esc(ns)}"></label><button type="submit">Show</button></form>')


def page(title: str, ns: str, body: str, status: int = 200) -> HTMLResponse:
    nav = " ".join(link(p, esc(label), ns) for p, label in (
        ("/", "Search"), ("/diff", "Changes"), ("/recalls", "Logged recalls")))
    text = (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{esc(title)} '
            f'- hmem audit</title><style>{_CSS}</style></head><body><header><b>hmem audit</b>'
            f'{nav}<span class="muted">namespace <code>{esc(ns)}</code> (read-only)</span>'
            f'</header><main><h1>{esc(title)}</h1>{body}</main></body></html>')
    return HTMLResponse(text, status_code=status, headers=_HEADERS)


def status_of(f: FactView) -> str:
    if f.forget_reason and f.forget_reason.startswith("erased"):
        return f'<span class="erased">{esc(f.forget_reason)}</span>'
    if f.forgotten_at is not None:
        why = f" ({esc(f.forget_reason)})" if f.forget_reason else ""
        return f'<span class="gone">forgotten {when(f.forgotten_at)}{why}</span>'
    if f.superseded_by is not None:
        return f'<span class="old">superseded by #{f.superseded_by}</span>'
    return '<span class="now">current</span>'


def valid(start: datetime | None, end: datetime | None) -> str:
    return f"{esc(day(start))} to {esc(day(end)) if end else '(open)'}"


# ---------------------------------------------------------------------------- the pages


class AuditPages:
    """The pages over one open (read-only) Memory and its namespaces; one read at a time."""

    def __init__(self, memory: Memory) -> None:
        self.memory = memory
        self.views: dict[str, Memory] = {memory.namespace: memory}
        self.lock = threading.Lock()

    def view(self, request: Request) -> tuple[str, Memory]:
        ns = request.query_params.get("ns", "").strip() or self.memory.namespace
        if ns in self.views:
            return ns, self.views[ns]
        view = self.memory.in_namespace(ns)
        if len(self.views) < _KEPT_VIEWS:  # any name may be asked for: keep only so many
            self.views[ns] = view
        return ns, view

    def handler(self, render: Callable[[Request, str, Memory], HTMLResponse]) -> Any:
        def endpoint(request: Request) -> HTMLResponse:
            ns = request.query_params.get("ns", "") or self.memory.namespace
            try:
                with self.lock:
                    ns, m = self.view(request)
                    return render(request, ns, m)
            except HmemError as e:
                missing = isinstance(e, (FactNotFound, LookupError))
                return page("Not found" if missing else "Cannot answer that", ns,
                            f'<p class="err">{esc(type(e).__name__)}: {esc(e)}</p>',
                            404 if missing else 400)
        return endpoint

    def search(self, request: Request, ns: str, m: Memory) -> HTMLResponse:
        q = request.query_params
        query, subject = q.get("q", "").strip(), q.get("subject", "").strip()
        as_of, valid_at = q.get("as_of", "").strip(), q.get("valid_at", "").strip()
        body = form("/", ns, [
            ("q", "what (recall)", query, "where does maya live"),
            ("subject", "about (history)", subject, "maya"),
            ("as_of", "believed as of", as_of, "2026-03-03, yesterday 5pm, or a seq"),
            ("valid_at", "true in the world at", valid_at, "2025-06-01"),
        ])
        point = tx_point(as_of) if as_of else None
        at = valid_at or None
        if query:
            found = m.recall(query, as_of=point, valid_at=at, subject=subject or None)
            body += f"<h2>Recall: {esc(query)}</h2>" + table(
                ["fact", "subject", "text", "valid", "recorded", "source", "score", "then"],
                ([fact_link(h.id, ns), esc(h.subject), shown_text(h.text),
                  valid(h.valid_from, h.valid_to), when(h.recorded_at),
                  esc(source_of(h.source_agent, h.source_ref)), f"{h.score:.4f}",
                  "believed" if h.superseded_by is None else f"superseded by #{h.superseded_by}"]
                 for h in found.hits), "no matching facts")
        if subject:
            if point is not None or at:
                key = subject.casefold()
                held = [b for b in m.beliefs(point, valid_at=at) if b.subject.casefold() == key]
                body += f"<h2>Believed about {esc(subject)} then</h2>" + table(
                    ["fact", "text", "valid", "recorded", "source", "later"],
                    ([fact_link(b.id, ns), shown_text(b.text), valid(b.valid_from, b.valid_to),
                      when(b.recorded_at), esc(source_of(b.source_agent, b.source_ref)),
                      "superseded" if b.superseded else ""] for b in held),
                    "nothing was believed about it then")
            facts = m.history(subject)
            body += f"<h2>History of {esc(subject)}</h2>" + table(
                ["fact", "text", "status", "source", "recorded", "versions"],
                ([fact_link(f.id, ns), shown_text(f.text), status_of(f),
                  esc(source_of(f.source_agent, f.source_ref)), when(f.recorded_at),
                  str(len(f.versions))] for f in facts), "no fact about this subject")
        if not (query or subject):
            if point is not None or at:
                body += "<h2>Every belief then</h2>" + _belief_table(m, point, at, ns)
            s = m.stats()
            heads = ["facts", "current", "superseded", "forgotten", "subjects", "events",
                     "log head"]
            body += "<h2>This namespace</h2>" + table(heads, [[
                str(s.facts), str(s.current), str(s.superseded), str(s.forgotten),
                str(s.subjects), str(s.namespace_events), str(s.head_seq)]])
        return page("What did the agent believe?", ns, body)

    def fact(self, request: Request, ns: str, m: Memory) -> HTMLResponse:
        w = m.why(int(request.path_params["fid"]))
        f = w.fact
        body = table(["fact", "subject", "text", "status", "source agent", "source ref",
                      "recorded"],
                     [[f"#{f.id}", esc(f.subject), shown_text(f.text), status_of(f),
                       esc(f.source_agent or "unknown"), esc(f.source_ref or "-"),
                       when(f.recorded_at)]])
        body += "<h2>Timeline: every version of the revision chain, oldest first</h2>"
        rows = []
        for link_ in w.chain:
            how = ""
            if link_.supersedes is not None:
                how = ("corrects " if link_.revision == "correction" else "world change after ")
                how += fact_link(link_.supersedes, ns)
                how += f" ({esc(link_.reason)})" if link_.reason else ""
            for v in link_.versions:
                rows.append([fact_link(link_.id, ns), shown_text(link_.text),
                             valid(v.valid_from, v.valid_to),
                             f"{when(v.tx_from)} (seq {v.tx_from_seq})",
                             (f"{when(v.tx_to)} (seq {v.tx_to_seq})" if v.tx_to else
                              '<span class="now">still believed</span>'),
                             status_of(link_), how,
                             esc(source_of(link_.source_agent, link_.source_ref))])
        body += table(["fact", "text", "valid time (true in the world)",
                       "believed from (transaction time)", "believed until", "status",
                       "revision", "source"], rows)
        if w.episodes:
            body += "<h2>Source turns</h2>" + table(
                ["seq", "session", "turn", "observed", "who", "text"],
                ([str(e.seq), esc(e.session_id), str(e.turn), when(e.observed_at),
                  esc(e.role + (f" {e.speaker}" if e.speaker else "")), shown_text(e.text)]
                 for e in w.episodes))
        body += "<h2>Events</h2>" + table(
            ["seq", "type", "transaction time", "who", "what"],
            ([str(ev.seq), esc(type(ev).__struct_config__.tag), when(ev.tx_at),
              esc(source_of(ev.source_agent, ev.source_ref)), _event_what(ev, ns)]
             for ev in w.events))
        body += "<h2>Shown to the agent (logged recalls)</h2>" + table(
            ["recall", "served", "caller", "query", "version", "rank"],
            ([link(f"/recall/{r.seq}", f"seq {r.seq}", ns), when(r.served_at),
              esc(source_of(r.source_agent, r.source_ref)), esc(r.query),
              fact_link(r.fact_id, ns), str(r.rank)] for r in w.seen_by),
            "no logged recall returned it")
        title = f"Fact #{f.id}: {visible(f.subject)}" if f.subject else f"Fact #{f.id}"
        return page(title, ns, body)

    def diff(self, request: Request, ns: str, m: Memory) -> HTMLResponse:
        q = request.query_params
        since, until = q.get("since", "").strip(), q.get("until", "").strip()
        body = form("/diff", ns, [
            ("since", "since", since, "2026-03-03 or a seq"),
            ("until", "until", until, "now"),
        ])
        if since:
            d = m.diff(tx_point(since) or 0, tx_point(until or None))
            body += (f"<h2>Changes after seq {d.since_seq} ({when(d.since_tx, open_end='-')}) "
                     f"up to seq {d.until_seq} ({when(d.until_tx, open_end='-')})</h2>")
            body += "<h2>Added</h2>" + table(
                ["fact", "subject", "text", "source", "recorded"],
                ([fact_link(f.id, ns), esc(f.subject), shown_text(f.text),
                  esc(source_of(f.source_agent, f.source_ref)), when(f.recorded_at)]
                 for f in d.added))
            body += "<h2>Revised</h2>" + table(
                ["old", "old text", "new", "new text", "kind", "reason", "source"],
                ([fact_link(r.old.id, ns), shown_text(r.old.text), fact_link(r.new.id, ns),
                  shown_text(r.new.text), esc("correction" if r.kind == "correction"
                                              else "world change"),
                  esc(r.new.reason or ""), esc(source_of(r.new.source_agent, r.new.source_ref))]
                 for r in d.revised))
            body += "<h2>Forgotten</h2>" + table(
                ["fact", "text", "when", "reason"],
                ([fact_link(f.id, ns), shown_text(f.text), when(f.forgotten_at),
                  esc(f.forget_reason or "")] for f in d.forgotten))
            body += "<h2>Erased</h2>" + table(
                ["fact", "receipt"],
                ([fact_link(f.id, ns), status_of(f)] for f in d.erased))
        return page("What changed?", ns, body)

    def recalls(self, request: Request, ns: str, m: Memory) -> HTMLResponse:
        q = request.query_params
        since, until = q.get("since", "").strip(), q.get("until", "").strip()
        ref = q.get("source_ref", "").strip()
        body = form("/recalls", ns, [
            ("since", "since", since, "a time or a seq"), ("until", "until", until, "now"),
            ("source_ref", "caller ref", ref, "s10:t2"),
        ])
        found = m.recalls(tx_point(since or None), tx_point(until or None), source_ref=ref or None)
        body += table(
            ["recall", "served", "caller", "query", "as of seq", "valid at", "hits"],
            ([link(f"/recall/{r.seq}", f"seq {r.seq}", ns), when(r.served_at),
              esc(source_of(r.source_agent, r.source_ref)), esc(r.query),
              str(r.as_of_seq) if r.as_of_seq is not None else "now",
              esc(day(r.valid_at)) if r.valid_at else "-",
              ", ".join(fact_link(h.id, ns) for h in r.hits) or "nothing"] for r in found),
            "no logged recall (log them with Memory(..., log_recalls=True) or hmem mcp "
            "--log-recalls)")
        return page("What was the agent shown?", ns, body)

    def recall(self, request: Request, ns: str, m: Memory) -> HTMLResponse:
        rp = m.replay_recall(int(request.path_params["seq"]))
        r = rp.recall
        body = table(["served", "caller", "query", "limit", "as of seq", "valid at", "subject",
                      "model"],
                     [[when(r.served_at), esc(source_of(r.source_agent, r.source_ref)),
                       esc(r.query), str(r.limit),
                       str(r.as_of_seq) if r.as_of_seq is not None else "now",
                       esc(day(r.valid_at)) if r.valid_at else "-", esc(r.subject or "-"),
                       esc(r.model or "-")]])
        verdict = ("the same hits in the same order" if rp.same
                   else f"it differs today: {esc(rp.differences)}")
        body += f"<h2>Shown to the agent</h2><p>Replayed against the log as it was: {verdict}</p>"
        if rp.erased_before:
            body += (f'<p class="muted">{rp.erased_before} event(s) before this recall were '
                     f"erased since; the replay ranks without their words.</p>")
        replayed = {h.rank: h for h in rp.replayed}
        rows = []
        for h in r.hits:
            again = replayed.get(h.rank)
            rows.append([str(h.rank), fact_link(h.id, ns), _text_of(m, h.id),
                         f"{h.score:.4f}",
                         "-" if again is None else f"{fact_link(again.id, ns)} {again.score:.4f}"])
        rows += [[str(h.rank), "-", "", "", f"{fact_link(h.id, ns)} {h.score:.4f}"]
                 for h in rp.replayed if h.rank > len(r.hits)]
        body += table(["rank", "fact", "text shown", "score", "replayed today"], rows,
                      "it was shown nothing")
        return page(f"Recall seq {r.seq}", ns, body)

    def missing(self, request: Request, exc: Exception) -> HTMLResponse:
        ns = request.query_params.get("ns", "") or self.memory.namespace
        code = exc.status_code if isinstance(exc, HTTPException) else 500
        return page("Not found" if code == 404 else "Error", ns,
                    f'<p class="err">{esc(getattr(exc, "detail", "") or code)}</p>', code)


def _belief_table(m: Memory, point: int | str | None, at: str | None, ns: str) -> str:
    return table(["fact", "subject", "text", "valid", "recorded", "source", "later"],
                 ([fact_link(b.id, ns), esc(b.subject), shown_text(b.text),
                   valid(b.valid_from, b.valid_to), when(b.recorded_at),
                   esc(source_of(b.source_agent, b.source_ref)),
                   "superseded" if b.superseded else ""]
                  for b in m.beliefs(point, valid_at=at)), "nothing was believed then")


def _text_of(m: Memory, fid: int) -> str:
    try:
        return shown_text(m.get(fid).text)
    except HmemError:
        return '<span class="erased">[erased]</span>'


def _event_what(ev: Event, ns: str) -> str:
    if isinstance(ev, FactRemembered):
        return f"remembered {fact_link(ev.seq, ns)}: {shown_text(ev.text)}"
    if isinstance(ev, FactRevised):
        kind = "correction" if ev.valid_from is None else f"valid from {esc(day(ev.valid_from))}"
        reason = f"; reason: {esc(ev.reason)}" if ev.reason else ""
        return (f"{fact_link(ev.fact_id, ns)} revised to {fact_link(ev.seq, ns)}: "
                f"{shown_text(ev.text)} ({kind}{reason})")
    if isinstance(ev, FactForgotten):
        return f"forgot {fact_link(ev.fact_id, ns)}" + (f": {esc(ev.reason)}" if ev.reason else "")
    if isinstance(ev, FactsErased):
        ids = ", ".join(fact_link(i, ns) for i in ev.fact_ids[:20])
        return (f'<span class="erased">[erased]</span> receipt: {esc(ev.scope)} erased, '
                f"{len(ev.fact_ids)} fact version(s) {ids}; log before it "
                f"<code>{esc(ev.chain_head)}</code>"
                + (f"; reason: {esc(ev.reason)}" if ev.reason else ""))
    return esc(type(ev).__name__)


def audit_app(memory: Memory, *, host: str = "127.0.0.1") -> Starlette:
    """The page's ASGI app over ``memory`` (open it read-only). On a loopback ``host`` only
    requests naming a loopback host are answered (no DNS rebinding from a web page)."""
    pages = AuditPages(memory)
    routes = [
        Route("/", pages.handler(pages.search)),
        Route("/fact/{fid:int}", pages.handler(pages.fact)),
        Route("/diff", pages.handler(pages.diff)),
        Route("/recalls", pages.handler(pages.recalls)),
        Route("/recall/{seq:int}", pages.handler(pages.recall)),
    ]
    middleware = ([Middleware(TrustedHostMiddleware, allowed_hosts=LOOPBACK_HOSTS)]
                  if is_loopback(host) else [])
    return Starlette(routes=routes, middleware=middleware,
                     exception_handlers={HTTPException: pages.missing, Exception: pages.missing})
