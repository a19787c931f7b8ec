"""Issue 12, the adapters under attack, through real processes.

Item 7: ``hmem mcp`` over a real stdio pipe, spoken to by hand in raw JSON lines (so a request
can hold what no SDK client sends: a lone surrogate escape, a raw control character, bytes that
are not UTF-8): every request gets an answer, every answer is UTF-8 JSON without a lone
surrogate, and a refused call leaves the log as it was.

Item 9: the CLI's human output shows stored and user-given control characters escaped, on
stdout and stderr alike; ``--json`` stays what its encoder wrote.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest

from eventlog.log import EventLog
from hmem import Memory
from hmem.notebook.export import export_jsonl
from projections.printable import json_visible

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "HMEM_EMBEDDER": "none", "PYTHONPATH": str(REPO)}
STARTUP = 90  # seconds for the server to answer initialize (imports; a loaded machine)
ANSWERS = 30  # seconds for every answer once it runs (a healthy server takes well under one)


def last_seq(store: Path) -> int:
    with EventLog(store / "log", read_only=True) as log:
        return log.last_seq


def lone_surrogates(value: Any) -> list[str]:
    """Every string (or key) in a decoded JSON value that holds a lone surrogate."""
    if isinstance(value, str):
        return [value] if any(0xD800 <= ord(c) <= 0xDFFF for c in value) else []
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in lone_surrogates(k) + lone_surrogates(v)]
    if isinstance(value, list):
        return [s for v in value for s in lone_surrogates(v)]
    return []


# ---------------------------------------------------------------------------- item 7: MCP stdio


class RawSession:
    """``python -m hmem --path STORE mcp`` as a subprocess, spoken to in raw JSON lines."""

    def __init__(self, store: Path, *args: str) -> None:
        self.errlog = open(store.parent / "server.err", "wb")  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "hmem", "--path", str(store), "mcp", *args],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.errlog, cwd=REPO, env=ENV,
        )
        self.lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            self.lines.put(raw)

    def send(self, line: str | bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((line.encode() if isinstance(line, str) else line) + b"\n")
        self.proc.stdin.flush()

    def answers(self, ids: set[Any], timeout: float, nulls: int = 0) -> dict[Any, list[bytes]]:
        """Raw answer lines by id until every id in ``ids`` has one (and ``nulls`` answers have
        a null id) or ``timeout`` passes; never an unbounded wait."""
        found: dict[Any, list[bytes]] = {}
        deadline = time.monotonic() + timeout

        def done() -> bool:
            return ids <= set(found) and len(found.get(None, ())) >= nulls

        while not done() and (left := deadline - time.monotonic()) > 0:
            try:
                raw = self.lines.get(timeout=left)
            except queue.Empty:
                break
            found.setdefault(json.loads(raw).get("id"), []).append(raw)
        return found

    def call(self, rid: int, name: str, timeout: float = ANSWERS, **arguments: Any) -> Any:
        self.send(json.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call",
                              "params": {"name": name, "arguments": arguments}}))
        got = self.answers({rid}, timeout)
        assert rid in got, f"no answer to {name} within {timeout}s"
        return json.loads(got[rid][0])["result"]

    def start(self) -> None:
        self.send(json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"}}}))
        assert 0 in self.answers({0}, STARTUP), "the server did not answer initialize"
        self.send('{"jsonrpc": "2.0", "method": "notifications/initialized"}')

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
            self.errlog.close()


def _call(rid: int, name: str, arguments: str) -> str:
    """A tools/call line whose ``name`` and ``arguments`` are raw JSON text."""
    return (f'{{"jsonrpc": "2.0", "id": {rid}, "method": "tools/call", '
            f'"params": {{"name": {name}, "arguments": {arguments}}}}}')


BIG = "x" * 200_000
DEEP = "[" * 400 + "]" * 400
# id -> one request line the server must answer with an error (raw JSON, escapes as written)
HOSTILE: dict[int, str | bytes] = {
    10: _call(10, '"remember"', r'{"subject": "maya", "text": "Maya \ud800 lives in Paris"}'),
    11: _call(11, '"remember"', r'{"subject": "ma\udfffya", "text": "Maya lives in Paris"}'),
    12: _call(12, '"remember"', r'{"subject": "maya", "text": "x", "entities": ["\ud83d"]}'),
    13: _call(13, '"remember"', r'{"subject": "maya", "text": "x", "source_ref": "\udc00\ud800"}'),
    14: _call(14, '"recall"', r'{"query": "where \ude00 maya"}'),
    15: _call(15, r'"remember\ud800"', r'{"subject": "maya", "text": "x"}'),
    16: _call(16, r'"\ud800"', "{}"),
    17: _call(17, '"remember"', r'{"subject": "maya", "text": "x", "\ud800": "unknown key"}'),
    18: _call(18, '"remember"', r'{"subject": "maya", "text": "x", "extra": "\udbff"}'),
    19: _call(19, '"remember"', f'{{"subject": "maya", "text": "{BIG}\\ud800"}}'),
    20: _call(20, '"remember"', f'{{"subject": "maya", "text": "{BIG}"}}'),
    21: _call(21, '"remember"', '{"subject": "maya", "text": "raw \x01 and \x1b control"}'),
    22: _call(22, '"remember"', r'{"subject": "ma\u001b]0;pwned\u0007ya", "text": "x"}'),
    23: _call(23, '"remember"', f'{{"subject": "maya", "text": "x", "entities": {DEEP}}}'),
    24: _call(24, '"remember"', '{"subject": "maya", "text": "caf\xe9"}').encode("latin-1"),
    25: r'{"jsonrpc": "2.0", "id": 25, "method": "ping", "params": {"x": ["\ud800"]}}',
    26: r'{"jsonrpc": "2.0", "id": 26, "method": "tools/list", "params": {"cursor": "\ud800"}}',
    27: _call(27, '"revise"', r'{"id": 1, "text": "\ud800", "reason": "\ud800"}'),
    28: _call(28, '"history"', r'{"subject": "\udc80"}'),
    29: _call(29, '"recall"', '{"query": "maya", "as_of": true}'),  # not seq 1
    30: _call(30, '"why"', '{"id": true}'),
    31: _call(31, '"recall"', '{"query": "maya", "limit": false}'),
}
# lines that cannot name their own id: each gets an answer with a null id
NO_ID = [
    _call(0, '"remember"', '{"subject": "x", "text": "x"}').replace('"id": 0', r'"id": "\ud800"'),
    "this is not JSON",
    *(f'{{"jsonrpc": "2.0", "id": {rid}, "method": "tools/list"}}'
      for rid in ('{"a": 1}', "[1]", "2.5", "true", "null")),  # ids JSON-RPC does not allow
]


@pytest.fixture
def store(tmp_path: Path) -> Path:
    path = tmp_path / "store"
    with Memory(path, embedder=None) as m:
        m.remember("maya", "Maya lives in London")
    return path


def test_every_stdio_request_is_answered_in_utf8_and_a_refused_call_stores_nothing(
    store: Path,
) -> None:
    before = last_seq(store)
    session = RawSession(store, "--usage-log")
    try:
        session.start()
        assert session.call(1, "stats")["structuredContent"]["seq"] == before
        for line in HOSTILE.values():
            session.send(line)
        session.send(r'{"jsonrpc": "2.0", "method": "notifications/x", "params": {"a": "\ud800"}}')
        for line in NO_ID:
            session.send(line)
        got = session.answers(set(HOSTILE), ANSWERS, nulls=len(NO_ID))
        missing = sorted(rid for rid in HOSTILE if rid not in got)
        assert not missing, f"no answer within {ANSWERS}s to requests {missing}"

        for rid, lines in got.items():
            for raw in lines:
                text = raw.decode("utf-8")  # strict: an answer is UTF-8
                message = json.loads(text)
                assert not lone_surrogates(message), (rid, text[:300])
                if rid is None:
                    assert message["error"]["code"] in (-32700, -32600), text
                    continue
                error = message.get("error") or message["result"]
                assert "error" in message or error["isError"] is True, text[:300]
                assert len(text) < 5000, "an answer quotes a long value only in part"
        assert len(got.get(None, ())) == len(NO_ID)
        for rid in (10, 11, 12, 13, 17, 18, 19, 21, 23, 24, 27, 28, 29, 30, 31):
            result = json.loads(got[rid][0])["result"]  # a refused tool call is a tool error
            assert result["structuredContent"]["error"] == "InvalidInput", result
        assert "params.arguments.text" in got[10][0].decode()  # it says where
        assert "lone surrogate" in got[15][0].decode()

        # nothing was stored, and the server still serves, reads and writes
        assert session.call(2, "stats")["structuredContent"]["seq"] == before
        assert "London" in session.call(3, "recall", query="where does maya live")["content"][0][
            "text"]
        assert not session.call(4, "remember", subject="maya", text="Maya likes \U0001f600 tea")[
            "isError"]
    finally:
        session.close()
    assert session.proc.returncode == 0
    assert last_seq(store) == before + 1
    with Memory(store, read_only=True, embedder=None) as m:
        assert [f.text for f in m.history("maya")] == ["Maya lives in London",
                                                      "Maya likes \U0001f600 tea"]
    usage = [json.loads(line) for line in (store / "usage.log").read_text().splitlines()]
    assert {"op": "remember", "ok": False} in [{"op": u["op"], "ok": u["ok"]} for u in usage]


def test_an_in_process_answer_never_carries_a_lone_surrogate_back_out(store: Path) -> None:
    """In process, as the SDK calls the tools: whatever the arguments hold, the result
    serialises as UTF-8 JSON (the SDK's writer fails on a lone surrogate)."""
    mcp_server = pytest.importorskip("hmem.adapters.mcp_tools")
    anyio = pytest.importorskip("anyio")

    cases = [("history", {"subject": "\ud800"}), ("recall", {"query": "maya \udfff"}),
             ("remember", {"subject": "maya", "text": "x\ud800"}),
             ("diff", {"since": "\ud800"}), ("recall", {"query": "maya", "as_of": "\ud800"})]
    with Memory(store, embedder=None) as m:
        server = mcp_server.build_server(m)
        before = m.last_seq
        for name, arguments in cases:
            try:
                result = anyio.run(server.call_tool, name, arguments)
            except Exception as e:  # the SDK's ToolError: its message goes out as the text
                str(e).encode("utf-8")
                continue
            wire = result.model_dump_json(by_alias=True)  # raises on a lone surrogate
            assert json.loads(wire)["isError"] is True, wire
            assert not lone_surrogates(json.loads(wire)), wire
        assert m.last_seq == before


# ---------------------------------------------------------------------------- item 9: CLI output

HOSTILE_TEXT = ("Maya \x1b]0;pwned\x07 lives\r in \x1b[2J London\nFAKE LINE \x9b31m\x7f end "
                "\u202egpj.exe \u2066isolated\u2069 \u200fmark\u2028SEPARATED")
C1 = range(0x80, 0xA0)
# bidi controls (they reorder what a reader sees) and the line / paragraph separators
BIDI = {0x061C, 0x200E, 0x200F, *range(0x2028, 0x202F), *range(0x2066, 0x206A)}


def _run_all(commands: list[list[str]]) -> list[tuple[int, bytes, bytes]]:
    """Each argv as ``python -m hmem ARGV`` in its own process, all at once."""
    procs = [subprocess.Popen([sys.executable, "-m", "hmem", *argv], cwd=REPO, env=ENV,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for argv in commands]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        results.append((p.returncode, out, err))
    return results


def _assert_harmless(stream: bytes, what: str) -> None:
    for byte, name in ((b"\x1b", "ESC"), (b"\x07", "BEL"), (b"\r", "CR")):
        assert byte not in stream, f"{what} holds a raw {name}: {stream[:400]!r}"
    text = stream.decode("utf-8")  # strict
    assert not [c for c in text if ord(c) in C1], f"{what} holds a C1 control: {text[:400]!r}"
    assert not [c for c in text if ord(c) in BIDI], f"{what} holds a bidi control: {text[:400]!r}"
    assert not [c for c in text if ord(c) < 0x20 and c not in "\t\n" or ord(c) == 0x7F], what
    assert "\nFAKE LINE" not in text, f"{what}: stored text started a line of its own"


@pytest.fixture
def hostile_store(tmp_path: Path) -> Path:
    path = tmp_path / "hostile"
    with Memory(path, embedder=None) as m:
        first = m.remember("maya", HOSTILE_TEXT, valid_from="2025-01-01",
                           source_agent="chat\x1b[31m", source_ref="ref\r\x07")
        second = m.revise(first, "Maya \x1b[1A moved\x9b to Paris\x00?", valid_from="2026-03-01",
                          reason="moved\x1b]8;;http://evil\x07", source_agent="a\x85b")
        m.forget(second, reason="bye\r\n\x1b[2K")
        m.remember("tom", "Tom \x1b[5m blinks", source_ref="\x1b]52;c;cGF5bG9hZA==\x07")
        m.remember("bo\u202e", "Bo \u2067sees\u2069 \u202a2\u202c", source_agent="\u202eagent",
                   entities=["Bo\u2066"])
    return path


def test_human_output_shows_stored_control_characters_escaped(
    hostile_store: Path, tmp_path: Path,
) -> None:
    s = ["--path", str(hostile_store)]
    commands = [
        [*s, "recall", "maya lives london"],
        [*s, "recall", "maya", "--as-of", "1", "--explain"],
        [*s, "recall", "tom"],
        [*s, "log", "show"],
        [*s, "log", "show", "--limit", "1"],
        [*s, "why", "1"], [*s, "why", "2"],
        [*s, "history", "maya"], [*s, "history", "tom"],
        [*s, "history", "no\x1b[2Jbody"],
        [*s, "diff", "0"],
        [*s, "beliefs"],
        [*s, "recalls"],
        [*s, "why", "4"],
        [*s, "history", "bo\u202e"],
        [*s, "stats"],
        [*s, "log", "verify"],
        [*s, "--namespace", "ns\x1b[2J\x9b", "stats"],
        [*s, "stats", "unknown\x1b]0;pwned\x07argument"],
        [*s, "why", "7\x1b[2J"],
        ["--path", str(tmp_path / "no\x1b[2Jstore\r"), "stats"],
        [*s, "export", "--parquet", str(tmp_path / "out\x1b]0;x\x07dir")],
        [*s, "timeline", "maya", "--out", str(tmp_path / "t\x1b[2J.png")],
        [*s, "timeline", "no\x1b]0;x\x07body", "--out", str(tmp_path / "t2.png")],
        [*s, "remember", "maya", "x", "--valid-from", "2025-13-45\x1b[2J"],
    ]
    results = _run_all(commands)
    for argv, (code, out, err) in zip(commands, results, strict=True):
        what = " ".join(argv[2:])
        assert code in (0, 1, 2), (what, err[-2000:])
        assert b"Traceback" not in err, (what, err[-2000:])
        _assert_harmless(out, f"stdout of {what!r}")
        _assert_harmless(err, f"stderr of {what!r}")

    text = "\n".join(out.decode() for _, out, _ in results)
    # shown, not dropped: a person sees what was stored
    assert "\\x1b]0;pwned\\x07 lives\\r in \\x1b[2J London" in text
    assert "\\x9b31m\\x7f end" in text and "ref\\r\\x07" in text
    log_show = results[3][1].decode()
    assert len(log_show.splitlines()) == 5, log_show  # one line per event, whatever they hold
    unknown = results[commands.index([*s, "stats", "unknown\x1b]0;pwned\x07argument"])][2].decode()
    assert "\\x1b]0;pwned" in unknown or "unknown" in unknown


def test_json_output_is_the_encoders_value_with_unsafe_characters_escaped(
    hostile_store: Path, tmp_path: Path,
) -> None:
    """--json and exports carry no raw DEL, C1 or bidi control: each is a JSON \\u escape,
    so the document decodes to exactly what was stored."""
    s = ["--path", str(hostile_store), "--json"]
    (c1, recall, _), (c2, log, _), (c3, history, _) = _run_all([
        [*s, "recall", "maya lives london", "--as-of", "1"], [*s, "log", "show"],
        [*s, "history", "maya"]])
    assert (c1, c2, c3) == (0, 0, 0)
    with Memory(hostile_store, read_only=True, embedder=None) as m:  # the texts opened
        events = m.store.log
        encoded = msgspec.json.encode(list(events.read(1, events.last_seq)))
        expected = json_visible(encoded.decode()).encode() + b"\n"
    assert log == expected and json.loads(log) == json.loads(encoded)
    for stream in (recall, log, history):
        _assert_harmless(stream.replace(b"\n", b" ").rstrip(), "--json output")
    with Memory(hostile_store, read_only=True, embedder=None) as m:
        plain = msgspec.json.encode(m.history("maya"))
        assert json.loads(history) == json.loads(plain)
        exported = tmp_path / "events.jsonl"
        export_jsonl(m, exported)
    for line in exported.read_bytes().splitlines():
        _assert_harmless(line, "an exported line")
    lines = exported.read_text().splitlines()
    assert HOSTILE_TEXT in [json.loads(line).get("text") for line in lines]
    hit = json.loads(recall)["hits"][0]
    assert hit["text"] == HOSTILE_TEXT  # the exact stored text, escaped only by JSON
