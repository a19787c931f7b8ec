"""``hmem mcp``, started as a subprocess and driven by the MCP SDK's own stdio client.

Results are read in their wire form (``model_dump(by_alias=True)``: ``structuredContent``,
``isError``, ``inputSchema``), as a client sees them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from hmem.adapters.cli import main
from hmem.adapters.usage import UsageLog, summarize_usage, usage_enabled
from hmem.errors import StoreLocked
from hmem.memory import Memory

anyio = pytest.importorskip("anyio")
pytest.importorskip("mcp")

from mcp import ClientSession, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
ALL_TOOLS = {"remember", "recall", "revise", "forget", "why", "diff", "history", "stats",
             "consolidate", "erase"}
WRITE_TOOLS = {"remember", "revise", "forget", "consolidate", "erase"}
TIMEOUT = 30  # seconds for one whole session; a healthy one takes about one


class Client:
    """A connected session with the results in wire form."""

    def __init__(self, session: ClientSession) -> None:
        self.session = session

    async def tools(self) -> dict[str, dict[str, Any]]:
        listed = await self.session.list_tools()
        return {t["name"]: t for t in (_wire(t) for t in listed.tools)}

    async def call(self, name: str, **arguments: Any) -> dict[str, Any]:
        result = _wire(await self.session.call_tool(name, arguments))
        result.setdefault("isError", False)
        result["text"] = "\n".join(c["text"] for c in result["content"] if c["type"] == "text")
        return result

    async def ok(self, name: str, **arguments: Any) -> dict[str, Any]:
        result = await self.call(name, **arguments)
        assert not result["isError"], result["text"]
        return result


def _wire(model: Any) -> dict[str, Any]:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


@asynccontextmanager
async def serve(
    store: Path, *args: str, env: dict[str, str] | None = None
) -> AsyncIterator[Client]:
    """``python -m hmem mcp --path STORE ARGS...`` with no embedder, connected and initialised."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "hmem", "mcp", "--path", str(store), *args],
        env={"HMEM_EMBEDDER": "none", **(env or {})},
        cwd=str(REPO),
    )
    with open(store.parent / f"{store.name}.server.err", "a") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                yield Client(session)


def run(body: Callable[[], Awaitable[None]]) -> None:
    async def bounded() -> None:
        with anyio.fail_after(TIMEOUT):
            await body()

    anyio.run(bounded)


def _stats(store: Path, namespace: str = "default") -> tuple[int, int]:
    """(facts in the namespace, events in the log), read beside any live writer."""
    with Memory(store, namespace=namespace, read_only=True, embedder=None) as m:
        s = m.stats()
        return s.facts, s.head_seq


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return tmp_path / "store"


# ---------------------------------------------------------------------------- schemas and errors


def check_schemas(tools: dict[str, dict[str, Any]]) -> None:
    assert set(tools) == ALL_TOOLS

    required = {
        "remember": ["subject", "text"], "recall": ["query"], "revise": ["id", "text"],
        "forget": ["id"], "why": ["id"], "diff": ["since"], "history": ["subject"],
        "stats": [], "consolidate": [], "erase": [],
    }
    for name, tool in tools.items():
        schema = tool["inputSchema"]
        assert schema["type"] == "object"
        assert sorted(schema.get("required", [])) == sorted(required[name]), name
        for prop in schema["properties"].values():
            assert prop.get("description"), (name, prop)
        assert tool["annotations"]["readOnlyHint"] is (name not in WRITE_TOOLS), name
        assert len(tool["description"]) > 150, name  # teaches when to use it

    props = {name: tool["inputSchema"]["properties"] for name, tool in tools.items()}
    assert props["remember"]["subject"]["type"] == "string"
    assert props["remember"]["subject"]["minLength"] == 1
    assert props["remember"]["text"]["maxLength"] == 4000
    assert props["remember"]["confidence"]["type"] == "number"
    assert (props["remember"]["confidence"]["minimum"],
            props["remember"]["confidence"]["maximum"]) == (0, 1)
    assert {"source_ref", "valid_from", "valid_to", "entities"} <= set(props["remember"])
    assert (props["revise"]["id"]["type"], props["revise"]["id"]["minimum"]) == ("integer", 1)
    assert props["recall"]["limit"]["type"] == "integer"
    assert (props["recall"]["limit"]["minimum"], props["recall"]["limit"]["maximum"]) == (1, 50)
    assert {"as_of", "valid_at", "subject"} <= set(props["recall"])
    assert {a["type"] for a in props["diff"]["since"]["anyOf"]} == {"integer", "string"}
    assert tools["forget"]["annotations"]["destructiveHint"] is True

    text = {name: tool["description"] for name, tool in tools.items()}
    assert "BEFORE answering" in text["recall"]
    assert "Never forget" in text["revise"] and "valid_from" in text["revise"]
    assert "correction" in text["revise"]
    assert "explicitly asks" in text["forget"]
    assert "how do you know" in text["why"]
    assert "what changed" in text["diff"]
    assert "source_ref" in text["remember"]


# ---------------------------------------------------------------------------- every tool


def test_every_tool_round_trip(store: Path) -> None:
    async def body() -> None:
        async with serve(store) as c:
            r = await c.ok("remember", subject="maya", text="Maya lives in London",
                           valid_from="2025-01-01", source_ref="chat 2025-01-02")
            london = r["structuredContent"]["id"]
            fact = r["structuredContent"]["fact"]
            assert (fact["text"], fact["source_ref"], fact["source_agent"]) == (
                "Maya lives in London", "chat 2025-01-02", "mcp")
            assert fact["versions"][0]["valid_from"] == "2025-01-01T00:00:00Z"
            assert f"#{london}" in r["text"] and "Maya lives in London" in r["text"]

            # The server is the writer; another process can still read what it wrote.
            with Memory(store, read_only=True, embedder=None) as reader:
                assert [h.id for h in reader.recall("maya london")] == [london]
            with pytest.raises(StoreLocked):
                Memory(store, embedder=None)

            r = await c.ok("revise", id=london, text="Maya lives in Paris",
                           valid_from="2026-03-01", reason="she moved", source_ref="s9:t2")
            paris = r["structuredContent"]["id"]
            assert r["structuredContent"]["revises"] == london
            assert r["structuredContent"]["kind"] == "world"
            assert r["structuredContent"]["previous"]["superseded_by"] == paris
            assert "the world changed" in r["text"]

            r = await c.ok("recall", query="where does maya live")
            hits = r["structuredContent"]["hits"]
            assert [h["id"] for h in hits] == [paris]
            assert hits[0]["history"][0]["text"] == "Maya lives in London"
            assert hits[0]["valid_from"] == "2026-03-01T00:00:00Z"
            assert f"[#{paris}]" in r["text"] and "replaced \"Maya lives in London\"" in r["text"]
            r = await c.ok("recall", query="where does maya live", valid_at="2025-06-01")
            assert [h["id"] for h in r["structuredContent"]["hits"]] == [london]
            r = await c.ok("recall", query="where does maya live", as_of=london)
            assert [h["text"] for h in r["structuredContent"]["hits"]] == ["Maya lives in London"]
            r = await c.ok("recall", query="quantum chromodynamics")
            assert r["structuredContent"]["hits"] == [] and "no matching facts" in r["text"]

            r = await c.ok("remember", subject="maya", text="Maya was born in Leeds")
            leeds = r["structuredContent"]["id"]
            r = await c.ok("revise", id=leeds, text="Maya was born in York", valid_from="")
            york = r["structuredContent"]["id"]
            assert r["structuredContent"]["kind"] == "correction"
            assert "correction" in r["text"]

            r = await c.ok("why", id=paris)
            why = r["structuredContent"]
            assert [f["id"] for f in why["chain"]] == [london, paris]
            assert why["chain"][0]["source_ref"] == "chat 2025-01-02"
            assert [(e["seq"], e["type"]) for e in why["events"]] == [
                (london, "remembered"), (paris, "revised")]
            assert "revision chain" in r["text"] and "chat 2025-01-02" in r["text"]

            r = await c.ok("diff", since=london)
            d = r["structuredContent"]
            assert [x["new"]["id"] for x in d["revised"]] == [paris, york]
            assert [x["kind"] for x in d["revised"]] == ["world", "correction"]
            assert "revised" in r["text"]
            r = await c.ok("diff", since="2000-01-01", until=str(london))
            assert [f["id"] for f in r["structuredContent"]["added"]] == [london]

            r = await c.ok("forget", id=york, reason="user asked")
            assert r["structuredContent"]["fact"]["forget_reason"] == "user asked"
            r = await c.ok("recall", query="where was maya born")
            assert york not in [h["id"] for h in r["structuredContent"]["hits"]]

            r = await c.ok("history", subject="Maya")
            facts = r["structuredContent"]["facts"]
            assert [f["id"] for f in facts] == [london, paris, leeds, york]
            assert facts[-1]["forgotten_at"] is not None
            assert "forgotten" in r["text"]

            r = await c.ok("stats")
            s = r["structuredContent"]
            assert (s["facts"], s["current"], s["superseded"], s["forgotten"]) == (4, 1, 2, 1)
            assert s["path"] == str(store) and s["namespace"] == "default"
            assert s["read_only"] is False and s["seq"] == s["head_seq"]
            assert "now" in s and "namespace   default" in r["text"]
        assert not (store / "usage.log").exists()  # off unless asked for

        async with serve(store) as c:  # a restart: the log is the state
            r = await c.ok("recall", query="where does maya live")
            assert [h["id"] for h in r["structuredContent"]["hits"]] == [paris]
            r = await c.ok("why", id=paris)
            assert [f["id"] for f in r["structuredContent"]["chain"]] == [london, paris]
            r = await c.ok("remember", subject="maya", text="Maya plays chess")
            assert r["structuredContent"]["id"] == york + 2  # after york's forget

    run(body)


# Bad calls: (tool, arguments, a hint the error must contain, whether hmem sees the call: the
# SDK refuses what breaks the schema before any tool code runs).
BAD_CALLS: list[tuple[str, dict[str, Any], str, bool]] = [
    ("remember", {"subject": "maya"}, "text", False),  # missing
    ("remember", {"subject": "", "text": "x"}, "subject", False),  # too short
    ("remember", {"subject": "maya", "text": 42}, "text", False),  # wrong type
    ("remember", {"subject": "maya", "text": "x", "confidence": 2}, "confidence", False),
    ("remember", {"subject": "maya", "text": "x", "valid_from": "next tuesday"}, "ISO 8601", True),
    ("remember", {"subject": "maya", "text": "x", "valid_from": "2025-01-01T09:00:00"},
     "time zone", True),
    ("remember", {"subject": "maya", "text": "x", "valid_from": "2025-02-01",
                  "valid_to": "2025-01-01"}, "is not after valid_from", True),
    ("revise", {"id": "abc", "text": "x"}, "id", False),
    ("revise", {"id": 0, "text": "x"}, "id", False),
    ("revise", {"id": 999, "text": "x"}, "recall or history", True),
    ("forget", {"id": 999}, "no fact 999", True),
    ("why", {"id": 999}, "no fact 999", True),
    ("recall", {"query": "tea", "limit": 0}, "limit", False),
    ("recall", {"query": "tea", "as_of": "yesterday-ish"}, "as_of", True),
    ("diff", {"since": "soon"}, "since", True),
    ("diff", {"since": 1, "until": 0}, "swap them", True),
    ("diff", {"since": 99}, "outside the log", True),
]


def test_schemas_bad_arguments_and_the_usage_log(
    store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The schemas say what is required and bounded. Whatever breaks them, or what the library
    refuses, comes back as a tool error with a hint, stores nothing, and the server stays up.
    The usage log (--usage-log) records each call's name, time and outcome, never its text."""
    secret = "Maya's passport number is XK-4471"

    async def body() -> None:
        async with serve(store, "--usage-log") as c:
            check_schemas(await c.tools())
            first = await c.ok("remember", subject="maya", text=secret, source_ref="secret-ref")
            fid = first["structuredContent"]["id"]
            before = _stats(store)

            for name, args, hint, _ in BAD_CALLS:
                r = await c.call(name, **args)
                assert r["isError"], (name, args, r)
                assert hint in r["text"], (name, args, r["text"])

            await c.ok("revise", id=fid, text="Maya's passport number is XK-4472")
            r = await c.call("revise", id=fid, text="Maya likes coffee")
            assert r["isError"] and r["structuredContent"]["error"] == "FactSuperseded"
            assert f"newest version, fact {fid + 1}" in r["text"]
            await c.ok("forget", id=fid + 1)
            r = await c.call("forget", id=fid + 1)
            assert r["isError"] and r["structuredContent"]["error"] == "FactAlreadyForgotten"

            assert _stats(store) == (before[0] + 1, before[1] + 2)  # the good revise and forget
            await c.ok("recall", query="passport XK-4472")  # the server is still up

    run(body)
    raw = (store / "usage.log").read_text()
    for needle in ("XK-447", "passport", "Maya", "maya", "secret-ref", "coffee"):
        assert needle not in raw
    records = [json.loads(line) for line in raw.splitlines()]
    assert all(set(r) == {"ts", "op", "ok"} for r in records)
    expected = [("remember", True), *((n, False) for n, _, _, _ in BAD_CALLS),
                ("revise", True), ("revise", False), ("forget", True), ("forget", False),
                ("recall", True)]
    assert [(r["op"], r["ok"]) for r in records] == expected

    assert main(["--path", str(store), "stats", "--usage", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    per_op = {u["op"]: (u["calls"], u["errors"]) for u in summary["ops"]}
    assert per_op == {"remember": (8, 7), "revise": (5, 4), "forget": (3, 2), "why": (1, 1),
                      "recall": (3, 2), "diff": (3, 3)}  # refused arguments are calls too
    assert summary["calls"] == len(expected) and summary["first"] <= summary["last"]
    assert main(["--path", str(store), "stats", "--usage"]) == 0
    out = capsys.readouterr().out
    assert "first use" in out and "remember" in out and "XK" not in out


# ---------------------------------------------------------------------------- lifetime


def test_namespaces_never_see_each_other(store: Path) -> None:
    async def body() -> None:
        async with serve(store, "--namespace", "work") as c:
            work = (await c.ok("remember", subject="project", text="Atlas ships in May"))
            work_id = work["structuredContent"]["id"]
            assert work["structuredContent"]["fact"]["namespace"] == "work"
        async with serve(store, env={"HMEM_NAMESPACE": "home"}) as c:
            home = (await c.ok("remember", subject="project", text="Kitchen paint is blue"))
            assert home["structuredContent"]["fact"]["namespace"] == "home"
            r = await c.ok("recall", query="Atlas ships in May")
            assert r["structuredContent"]["hits"] == []
            assert (await c.call("why", id=work_id))["isError"]
            assert (await c.call("revise", id=work_id, text="x"))["isError"]
            r = await c.ok("history", subject="project")
            assert [f["text"] for f in r["structuredContent"]["facts"]] == ["Kitchen paint is blue"]
            assert (await c.ok("stats"))["structuredContent"]["facts"] == 1
        with Memory(store, namespace="work", read_only=True, embedder=None) as m:
            assert list(m.recall("kitchen paint blue")) == []
            assert [f.text for f in m.diff(0).added] == ["Atlas ships in May"]

    run(body)


def test_the_server_embeds_in_the_background_and_finishes_before_it_exits(store: Path) -> None:
    async def body() -> None:
        async with serve(store, env={"HMEM_EMBEDDER": "hash-16"}) as c:
            for i in range(5):
                await c.ok("remember", subject="maya", text=f"Maya fact {i}")
            stats = (await c.ok("stats"))["structuredContent"]
            assert 0 <= stats["embedding_backlog"] <= 5

    run(body)
    with Memory(store, read_only=True, embedder=None) as m:  # the server's close drained
        assert m.stats().vectors == 5


def test_read_only_offers_no_write_tools(store: Path) -> None:
    with Memory(store, embedder=None) as m:
        m.remember("maya", "Maya lives in London")

    async def body() -> None:
        writer = Memory(store, embedder=None)  # a live writer elsewhere does not matter
        try:
            async with serve(store, "--read-only") as c:
                assert set(await c.tools()) == ALL_TOOLS - WRITE_TOOLS
                r = await c.call("remember", subject="maya", text="Maya lives in Rome")
                assert r["isError"] and "remember" in r["text"]
                writer.remember("maya", "Maya plays chess")  # the server follows the log
                r = await c.ok("recall", query="maya chess")
                assert [h["text"] for h in r["structuredContent"]["hits"]][0] == "Maya plays chess"
                assert (await c.ok("stats"))["structuredContent"]["read_only"] is True
        finally:
            writer.close()
        assert _stats(store) == (2, 2)

    run(body)


def test_startup_errors_exit_cleanly(
    store: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert main(["--path", str(store), "mcp", "--read-only"]) == 1  # nothing to read yet
    assert "no hmem store at" in capsys.readouterr().err and not store.exists()
    with Memory(store, embedder=None):
        assert main(["--path", str(store), "mcp"]) == 1  # another process is the writer
        assert "open for writing by another process" in capsys.readouterr().err
    monkeypatch.delitem(sys.modules, "hmem.adapters.mcp_tools", raising=False)
    monkeypatch.delitem(sys.modules, "hmem.adapters.mcp_stdio", raising=False)
    monkeypatch.setitem(sys.modules, "mcp.types", None)  # as if the extra were not installed
    assert main(["--path", str(store), "mcp"]) == 1
    assert 'uvx --from "hmem[mcp] @ file://$PWD" hmem mcp' in capsys.readouterr().err


# ---------------------------------------------------------------------------- usage log


def test_usage_log_is_opt_in(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HMEM_USAGE_LOG", raising=False)
    assert not usage_enabled() and usage_enabled(True)
    for value, on in [("1", True), ("yes", True), ("TRUE", True), ("0", False), ("", False)]:
        monkeypatch.setenv("HMEM_USAGE_LOG", value)
        assert usage_enabled() is on, value


def test_usage_summary_counts_and_bad_lines(tmp_path: Path) -> None:
    from datetime import datetime, timedelta, timezone

    t0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
    ticks = iter(range(10))
    log = UsageLog(tmp_path, clock=lambda: t0 + timedelta(minutes=next(ticks)))
    for op, ok in [("recall", True), ("remember", True), ("recall", False), ("recall", True)]:
        log.record(op, ok=ok)
    with open(log.path, "ab") as f:
        f.write(b'{"ts":"2026-01-01T00:09:00","op":"naive"}\n{"ts":"2026-01-01T00:0')  # torn
    s = summarize_usage(tmp_path)
    assert [(u.op, u.calls, u.errors) for u in s.ops] == [("recall", 3, 1), ("remember", 1, 0)]
    assert s.ops[0].first == t0 and s.ops[0].last == t0 + timedelta(minutes=3)
    assert (s.calls, s.unreadable_lines, s.exists) == (4, 2, True)
    missing = summarize_usage(tmp_path / "nowhere")
    assert (missing.exists, missing.calls, missing.ops) == (False, 0, ())


def test_log_recalls_records_what_the_agent_saw_and_the_cli_replays_it(store: Path) -> None:
    async def body() -> None:
        async with serve(store, "--log-recalls", env={"HMEM_EMBEDDER": "hash-16"}) as c:
            fid = (await c.ok("remember", subject="maya", text="Maya lives in London"))[
                "structuredContent"]["id"]
            r = await c.ok("recall", query="where does maya live", source_ref="s4:t7")
            assert [h["id"] for h in r["structuredContent"]["hits"]] == [fid]
            await c.ok("recall", query="tea")  # logged too, with no caller reference

    run(body)
    with Memory(store, read_only=True, embedder=None) as m:
        logged = m.recalls()
        assert [(r.query, r.source_agent, r.source_ref) for r in logged] == [
            ("where does maya live", "mcp", "s4:t7"), ("tea", "mcp", None),
        ]
        assert [h.id for h in logged[0].hits] == [1]
    cli = [sys.executable, "-m", "hmem", "--path", str(store)]
    env = {**os.environ, "HMEM_EMBEDDER": "none"}
    listed = subprocess.run([*cli, "recalls", "--source-ref", "s4:t7", "--json"],
                            capture_output=True, text=True, env=env, timeout=120, cwd=REPO)
    assert listed.returncode == 0, listed.stderr
    seq = json.loads(listed.stdout)[0]["seq"]
    replay = subprocess.run([*cli, "replay-recall", str(seq)], capture_output=True, text=True,
                            env=env, timeout=120, cwd=REPO)
    assert replay.returncode == 0, replay.stderr
    assert "the same hits in the same order" in replay.stdout
    why = subprocess.run([*cli, "why", "1"], capture_output=True, text=True, env=env,
                         timeout=120, cwd=REPO)
    assert why.returncode == 0 and "seen by the agent" in why.stdout and "s4:t7" in why.stdout


def test_log_recalls_needs_the_writer(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with Memory(store, embedder=None) as m:
        m.remember("maya", "Maya lives in London")
    assert main(["--path", str(store), "mcp", "--read-only", "--log-recalls"]) == 1
    assert "--log-recalls needs the writer" in capsys.readouterr().err


def test_bad_arguments_are_named_without_echoing_values_and_unknown_ones_refused(
    store: Path,
) -> None:
    async def body() -> None:
        async with serve(store, "--usage-log") as c:
            r = await c.call("remember", subject="maya")
            assert r["isError"] and r["text"] == "remember: `text` is required"
            r = await c.call("remember", subject="maya", text="x", confidence=7)
            assert r["isError"] and "`confidence`" in r["text"] and "pydantic" not in r["text"]
            assert "7" not in r["text"].replace("`confidence`", "")  # the value is not echoed
            r = await c.call("remember", subject="maya", text="Maya likes tea", colour="red")
            assert r["isError"] and "takes no argument 'colour'" in r["text"]
            assert "subject, text" in r["text"]
            assert r["structuredContent"]["error"] == "InvalidInput"
            await c.ok("stats")

    run(body)
    assert _stats(store) == (0, 0)  # nothing stored
    ops = [json.loads(line) for line in (store / "usage.log").read_text().splitlines()]
    assert [(o["op"], o["ok"]) for o in ops] == [("remember", False)] * 3 + [("stats", True)]


def test_spoken_times_work_over_mcp_and_two_readings_are_refused(store: Path) -> None:
    async def body() -> None:
        async with serve(store) as c:
            fid = (await c.ok("remember", subject="maya", text="Maya lives in London",
                              valid_from="yesterday 14:02"))["structuredContent"]["id"]
            changed = await c.ok("diff", since="1 hour ago")
            assert [f["id"] for f in changed["structuredContent"]["added"]] == [fid]
            then = await c.ok("recall", query="maya", as_of="now")
            assert [h["id"] for h in then["structuredContent"]["hits"]] == [fid]
            refused = await c.call("diff", since="03/04/2025")
            assert refused["isError"] and "day/month" in refused["text"]
            assert "month/day" in refused["text"]

    run(body)
    with Memory(store, read_only=True, embedder=None) as m:
        assert m.history("maya")[0].versions[0].valid_from.strftime("%H:%M") == "14:02"
