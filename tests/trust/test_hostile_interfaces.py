"""Hostile input through the CLI and the MCP tools: a typed, actionable error and nothing appended.

CLI: exit code != 0, one ``error: ...`` line on stderr, no traceback. MCP (tools called in
process, as the SDK calls them): an error result, or the SDK's own argument-validation error;
never an unexpected exception; the server keeps serving. Either way the log does not grow.
"""

from __future__ import annotations

import math

import pytest

from eventlog.log import EventLog
from hmem import Memory
from hmem.adapters.cli import main

BIG = "x" * 300_000
HUGE_DIGITS = "9" * 5000  # beyond Python's int() digit limit


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    path = tmp_path_factory.mktemp("hostile") / "s"
    with Memory(path, embedder=None) as m:
        m.remember("maya", "Maya lives in London")
        m.in_namespace("other").remember("tom", "Tom likes tea")
    return path


def log_len(path) -> int:  # type: ignore[no-untyped-def]
    with EventLog(path / "log", read_only=True) as log:
        return log.last_seq


CLI_CASES = [
    ["remember", "ma\x00ya", "text"],
    ["remember", "maya", BIG],
    ["remember", "maya", "t", "--valid-from", "2025-13-45"],
    ["remember", "maya", "t", "--valid-from", "2025-01-01T10:00"],  # no zone
    ["remember", "maya", "t", "--valid-from", "99999-01-01"],
    ["remember", "maya", "t", "--confidence", "nan"],
    ["remember", "maya", "t", "--confidence", "1e400"],
    ["remember", "maya", "\udcff\udcfe undecodable argv"],
    ["remember", "", "empty subject"],
    ["revise", "-1", "x"],
    ["revise", "2", "another namespace's fact"],
    ["revise", "²", "x"],  # str.isdigit() is true, int() fails
    ["forget", HUGE_DIGITS],
    ["forget", "1e5"],
    ["why", "99999999999999999999999999"],
    ["recall", "maya", "--as-of", HUGE_DIGITS],
    ["recall", "maya", "--as-of", "-1"],
    ["recall", "maya", "--valid-at", "yesterday-ish"],
    ["recall", "maya", "--limit", "-3"],
    ["recall", "maya", "--limit", HUGE_DIGITS],
    ["diff", "garbage"],
    ["diff", "1", "0"],
    ["diff", "99999999999999999999"],
    ["--namespace", "\x00", "stats"],
    ["--namespace", "a" * 600, "stats"],
    ["--namespace", "", "stats"],
    ["--namespace", "other", "why", "1"],
    ["export", "--parquet", "a\x00b"],
    ["export", "--parquet", ""],
    ["export", "--parquet", "/dev/null"],
    ["timeline", "nobody", "--out", "x.png"],
    ["--path", "a\x00b", "remember", "a", "b"],
    ["log", "show", "--from", "-5"],
    ["--fsync", "sometimes", "stats"],
    ["--embedder", "bogus", "recall", "maya"],
]


@pytest.mark.parametrize("argv", CLI_CASES, ids=lambda a: " ".join(a)[:40])
def test_hostile_cli_input_is_one_error_line_and_appends_nothing(store, argv, capsys, tmp_path,
                                                                 monkeypatch):
    monkeypatch.chdir(tmp_path)
    before = log_len(store)
    code = main(["--path", str(store), "--embedder", "none", *argv])
    out, err = capsys.readouterr()
    assert code != 0
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert len(lines[0]) < 400, "the message quotes a long value only in part"
    assert log_len(store) == before


def test_reading_an_unknown_namespace_is_empty_with_a_note_that_names_no_other(store, capsys):
    """Not an error (an agent's new namespace starts empty), but a typo should not go unseen;
    the note must not list the store's other namespaces (their names are theirs)."""
    before = log_len(store)
    code = main(["--path", str(store), "--embedder", "none", "--namespace", "defualt",
                 "recall", "maya"])
    out, err = capsys.readouterr()
    assert code == 0 and "no matching facts" in out
    assert "'defualt' holds nothing" in err
    assert "other" not in err.replace("another", "") and "'default'" not in err
    assert log_len(store) == before
    assert main(["--path", str(store), "--embedder", "none", "recall", "maya"]) == 0
    assert "note:" not in capsys.readouterr().err


# ---------------------------------------------------------------------------- MCP

try:
    import anyio
    import pydantic

    from hmem.adapters import mcp_tools as mcp_server
except ImportError:  # the mcp extra is not installed: the CLI cases still run
    mcp_server = None  # type: ignore[assignment]

MCP_CASES = [
    ("remember", {"subject": "maya", "text": BIG}),
    ("remember", {"subject": "ma\x00ya", "text": "t"}),
    ("remember", {"subject": "maya", "text": "t", "valid_from": "2025-02-30"}),
    ("remember", {"subject": "maya", "text": "t", "valid_from": "2025-01-01T10:00"}),
    ("remember", {"subject": "maya", "text": "t", "confidence": math.nan}),
    ("remember", {"subject": "maya", "text": "t", "confidence": "high"}),
    ("remember", {"subject": ["maya"], "text": "t"}),
    ("remember", {"subject": "maya"}),  # missing text
    ("remember", {"subject": "maya", "text": "\ud800 lone surrogate"}),
    ("remember", {"subject": "maya", "text": "t", "entities": "Maya"}),
    ("revise", {"id": -1, "text": "x"}),
    ("revise", {"id": 2**70, "text": "x"}),
    ("revise", {"id": "abc", "text": "x"}),
    ("revise", {"id": 1.5, "text": "x"}),
    ("revise", {"id": 2, "text": "another namespace's fact"}),
    ("revise", {"id": 1, "text": "x", "valid_from": "not a date"}),
    ("forget", {"id": None}),
    ("forget", {"id": 2}),
    ("why", {"id": 10**30}),
    ("why", {"id": [1]}),
    ("recall", {"query": ""}),
    ("recall", {"query": BIG}),
    ("recall", {"query": "maya", "as_of": HUGE_DIGITS}),
    ("recall", {"query": "maya", "as_of": "²"}),
    ("recall", {"query": "maya", "as_of": -5}),
    ("recall", {"query": "maya", "valid_at": "yesterday-ish"}),
    ("recall", {"query": "maya", "limit": 10**9}),
    ("diff", {"since": "garbage"}),
    ("diff", {"since": HUGE_DIGITS}),
    ("diff", {"since": 5, "until": 1}),
    ("history", {"subject": BIG}),
    ("nonexistent_tool", {}),
]


def call(server, name: str, arguments: dict):  # type: ignore[no-untyped-def]
    """``(is_error, message)`` the way a client would see them; unexpected exceptions raise."""

    async def go():  # type: ignore[no-untyped-def]
        return await server.call_tool(name, arguments)

    try:
        result = anyio.run(go)
    except Exception as e:  # the SDK's ToolError for unknown tools and invalid arguments
        cause = e.__cause__
        assert cause is None or isinstance(cause, pydantic.ValidationError), (
            f"{name} raised an unexpected {type(cause).__name__}: {cause}")
        assert "Unexpected" not in type(e).__name__, repr(e)
        return True, str(e)
    wire = result.model_dump(mode="json", by_alias=True, exclude_none=True)
    return wire.get("isError", False), wire["content"][0]["text"]


@pytest.mark.skipif(mcp_server is None, reason="needs the mcp extra")
@pytest.mark.parametrize("name,arguments", MCP_CASES, ids=lambda v: str(v)[:40])
def test_hostile_mcp_arguments_give_an_error_result_and_append_nothing(store, name, arguments):
    with Memory(store, embedder=None) as m:
        server = mcp_server.build_server(m)
        before = m.last_seq
        is_error, message = call(server, name, arguments)
        assert is_error, message
        assert message and len(message) < 2000
        assert m.last_seq == before
        ok, text = call(server, "stats", {})  # the server keeps serving
        assert not ok and "facts" in text


@pytest.mark.parametrize("value", ["²", "١٢", HUGE_DIGITS, "#" + HUGE_DIGITS, "1e3", 1.0, True])
def test_a_fact_id_that_is_not_a_small_integer_is_a_typed_error(store, value):
    from hmem.errors import InvalidInput

    with Memory(store, read_only=True, embedder=None) as m:
        with pytest.raises(InvalidInput, match="a fact id is an integer") as info:
            m.why(value)
        assert len(str(info.value)) < 200
