"""The CLI, run in-process through ``main([...])`` (and once as ``python -m hmem``)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hmem.adapters.cli import build_parser, iter_parsers, main
from hmem.errors import InvalidTime
from hmem.memory import Memory
from hmem.time.iso import parse_time

REPO = Path(__file__).resolve().parents[2]
Run = Callable[..., tuple[int, str, str]]
Maya = tuple[int, int, int]


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("HMEM_NAMESPACE", raising=False)
    monkeypatch.setenv("HMEM_HOME", str(tmp_path / "not-this-one"))


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return tmp_path / "store"


@pytest.fixture
def run(store: Path, capsys: pytest.CaptureFixture[str]) -> Run:
    """Run ``hmem --path STORE ARGS...``; returns (exit code, stdout, stderr)."""

    def _run(*args: str, path: Path | None = store) -> tuple[int, str, str]:
        argv = (["--path", str(path)] if path is not None else []) + list(args)
        code = main(argv)
        out, err = capsys.readouterr()
        return code, out, err

    return _run


def _json(run: Run, *args: str) -> Any:
    code, out, err = run(*args, "--json")
    assert code == 0, err
    return json.loads(out)


def _events(run: Run) -> int:
    return _json(run, "stats")["head_seq"]


@pytest.fixture
def maya(run: Run) -> Maya:
    """London (remembered), then Paris (a world change); returns (london, seq after it, paris)."""
    code, out, err = run("remember", "maya", "Maya lives in London", "--valid-from", "2025-01-01",
                         "--source-agent", "chat", "--source-ref", "s1:t3")
    assert code == 0, err
    london = int(out.strip().lstrip("#"))
    seq = _events(run)
    code, out, err = run("revise", f"#{london}", "Maya lives in Paris",
                         "--valid-from", "2026-03-01", "--source-ref", "s9:t2")
    assert code == 0, err
    return london, seq, int(out.strip().lstrip("#"))


# ---------------------------------------------------------------------------- round trip


def test_round_trip(run: Run, maya: Maya) -> None:
    london, seq, paris = maya
    assert (london, seq, paris) == (1, 1, 2)

    code, out, _ = run("recall", "where does maya live")
    assert code == 0
    assert "Maya lives in Paris" in out and f"[#{paris}]" in out
    assert 'replaced "Maya lives in London", 2025-01-01 to 2026-03-01' in out

    code, out, _ = run("recall", "where does maya live", "--as-of", str(seq))
    assert code == 0 and "Maya lives in London" in out and "Paris" not in out

    code, out, _ = run("recall", "where does maya live", "--valid-at", "2025-06-01")
    assert code == 0 and "Maya lives in London (2025-01-01 to 2026-03-01)" in out

    code, out, _ = run("why", str(paris))
    assert code == 0
    assert "source chat s9:t2" in out
    london_at = out.index('#1 maya: "Maya lives in London"')
    assert london_at < out.index('#2 maya: "Maya lives in Paris"')
    assert "valid 2025-01-01 to 2026-03-01" in out and "seq 2  revised" in out

    code, out, _ = run("diff", str(seq))
    assert code == 0
    assert 'revised    #1 "Maya lives in London" -> #2 "Maya lives in Paris" (world change)' in out

    code, out, _ = run("forget", str(paris), "--reason", "user asked")
    assert code == 0 and out.strip() == "forgot #2 (log seq 3)"

    code, out, _ = run("recall", "where does maya live")
    assert code == 0 and out.strip() == "(no matching facts)"

    code, out, _ = run("history", "Maya")
    assert code == 0
    assert "[superseded by #2]" in out and "[forgotten" in out and "user asked" in out

    code, out, _ = run("diff", "2")
    assert "forgotten  #2" in out

    code, out, _ = run("stats")
    assert code == 0
    assert "2 (0 current, 1 superseded, 1 forgotten)" in out and "log head    3:" in out


def test_json_output(run: Run, maya: Maya) -> None:
    london, seq, paris = maya
    assert _json(run, "remember", "bob", "Bob drinks tea") == {
        "id": 3, "repeat": False, "outcome": "new"}
    assert _json(run, "revise", "3", "Bob drinks coffee") == {
        "id": 4, "revises": 3, "outcome": "new"}
    assert _json(run, "remember", "bob", "Bob drinks coffee", "--request-id", "r1") == {
        "id": 4, "repeat": True, "outcome": "repeat"}  # a repeat, though it has a request id

    hits = _json(run, "recall", "where does maya live")["hits"]
    assert [h["id"] for h in hits] == [paris]
    assert hits[0]["history"][0]["id"] == london
    assert hits[0]["valid_from"] == "2026-03-01T00:00:00Z"

    why = _json(run, "why", str(paris))
    assert [f["id"] for f in why["chain"]] == [london, paris]
    assert [e["type"] for e in why["events"]] == ["remembered", "revised"]

    diff = _json(run, "diff", str(seq), "2")
    assert [(r["old"]["id"], r["new"]["id"], r["kind"]) for r in diff["revised"]] == [
        (london, paris, "world")
    ]
    assert [f["id"] for f in _json(run, "history", "maya")] == [london, paris]
    assert [e["seq"] for e in _json(run, "log", "show")] == [1, 2, 3, 4]
    assert _json(run, "log", "verify")["ok"] is True
    assert _json(run, "replay", "verify")["ok"] is True

    assert _json(run, "forget", str(paris)) == {"id": paris, "seq": 5, "outcome": "new"}
    stats = _json(run, "stats")
    assert (stats["facts"], stats["forgotten"], stats["head_seq"]) == (4, 1, 5)

    # --json before the command works as well as after it
    code, out, _ = run("--json", "stats")
    assert code == 0 and json.loads(out)["head_seq"] == 5


def test_namespace_and_option_order(run: Run, store: Path) -> None:
    assert run("--namespace", "work", "remember", "maya", "Maya manages the Lisbon office")[0] == 0
    code, out, _ = run("recall", "lisbon")
    assert out.strip() == "(no matching facts)"
    code, out, _ = run("recall", "lisbon", "--namespace", "work")
    assert "Lisbon" in out
    code, out, _ = run("stats", "--path", str(store), "--namespace", "work", path=None)
    assert code == 0 and "namespace   work" in out


def test_env_defaults(run: Run, store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HMEM_HOME", str(store))
    monkeypatch.setenv("HMEM_NAMESPACE", "env-ns")
    assert run("remember", "x", "X is here", path=None)[0] == 0
    assert _json(run, "stats")["namespace"] == "env-ns"
    assert _json(run, "stats")["facts"] == 1


# ---------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    "args, message",
    [
        (["revise", "99", "Maya lives in Rome"], "no fact 99"),
        (["forget", "99"], "no fact 99"),
        (["remember", "maya", "   "], "text is empty"),
        (["remember", "maya", "Maya is here", "--valid-from", "2025-01-01T10:00"], "no time zone"),
        (["revise", "2", "Maya lives in Rome", "--valid-to", "2020-01-01"], "valid"),
        (["revise", "1", "Maya lives in Rome"], "already revised"),
        (["remember", "maya", "Maya is here", "--confidence", "7"], "confidence"),
    ],
)
def test_errors_are_one_line_and_append_nothing(
    run: Run, maya: Maya, args: list[str], message: str
) -> None:
    before = _events(run)
    code, out, err = run(*args)
    assert code == 1
    assert out == ""
    assert err.startswith("error: ") and err.endswith("\n") and err.count("\n") == 1
    assert message in err
    assert "Traceback" not in err
    assert _events(run) == before


def test_read_errors(run: Run, maya: Maya, tmp_path: Path) -> None:
    for args in (["why", "99"], ["recall", "x", "--as-of", "2025-01-01T10:00"],
                 ["recall", "x", "--as-of", "999"], ["diff", "2", "1"]):
        code, out, err = run(*args)
        assert code == 1 and out == "" and err.startswith("error: ") and err.count("\n") == 1


@pytest.mark.parametrize("args", [["stats"], ["recall", "x"], ["why", "1"], ["log", "verify"],
                                  ["log", "show"], ["history", "maya"]])
def test_missing_store_is_a_clean_error(run: Run, tmp_path: Path, args: list[str]) -> None:
    missing = tmp_path / "nowhere"
    code, out, err = run(*args, path=missing)
    assert code == 1 and out == ""
    assert err.startswith(f"error: no hmem store at {missing}")
    assert not missing.exists()  # a read never creates a store


def test_usage_errors_exit_2(run: Run, capsys: pytest.CaptureFixture[str]) -> None:
    assert run("revise", "abc", "text")[0] == 2
    assert run("recall", "x", "--limit", "0")[0] == 2
    assert run("--fsync", "sometimes", "stats")[0] == 2
    assert run("nonsense")[0] == 2
    assert run("--namespace", "", "remember", "a", "A b")[0] == 2
    assert run("remember", "a", "A b", "--namespace", " ")[0] == 2
    assert run("remember", "a", "A b")[0] == 0  # no writer lock was left behind


def test_writer_lock_is_a_clean_error(run: Run, store: Path) -> None:
    with Memory(store):
        code, out, err = run("remember", "maya", "Maya lives in Oslo")
    assert code == 1
    assert err.startswith("error: ") and "open for writing by another process" in err
    assert err.count("\n") == 1


# ---------------------------------------------------------------------------- log and replay


def test_log_and_replay(run: Run, maya: Maya) -> None:
    code, out, _ = run("log", "verify")
    assert code == 0 and out.startswith("ok: 2 events in 1 segment(s)")

    code, out, _ = run("log", "repair")
    assert code == 0 and "nothing to repair" in out

    code, out, err = run("log", "show", "--from", "2", "--limit", "1")
    assert code == 0
    assert len(out.splitlines()) == 1
    assert "revised" in out and '#1 -> #2 "Maya lives in Paris"' in out

    code, out, err = run("log", "show", "--limit", "1")
    assert len(out.splitlines()) == 1 and "continue with --from 2" in err

    code, out, err = run("replay", "rebuild")
    assert code == 0 and out.strip() == "rebuilt the projection from 2 events"
    assert err == ""  # stderr is not a TTY: no progress output

    code, out, _ = run("replay", "verify")
    assert code == 0 and out.startswith("ok: the projection matches a replay of 2 events")


def test_replay_verify_names_a_checkpoint_an_open_refuses(
    run: Run, maya: Maya, store: Path
) -> None:
    """A changed checkpoint is never loaded, so the projection still matches the log (ok), and
    the report says the checkpoint was refused, in its text and its JSON."""
    checkpoint = store / "checkpoint.columns"
    data = bytearray(checkpoint.read_bytes())
    data[-5] ^= 1
    checkpoint.write_bytes(bytes(data))
    report = _json(run, "replay", "verify")
    assert report["ok"] is True
    assert len(report["notes"]) == 1 and "not authentic" in report["notes"][0]
    code, out, _ = run("replay", "verify")
    assert code == 0 and "note: checkpoint" in out and "not authentic" in out


def test_log_verify_finds_corruption(run: Run, maya: Maya, store: Path) -> None:
    segment = next((store / "log").glob("*.hlog"))
    data = bytearray(segment.read_bytes())
    data[-30] ^= 0xFF  # damage the last record
    segment.write_bytes(bytes(data))
    code, out, _ = run("log", "verify")
    assert code == 1 and "corrupted" in out and "log repair" in out

    code, out, _ = run("log", "repair")
    assert code == 0 and "backup of the cut bytes" in out and "kept 1 events" in out
    assert run("log", "verify")[0] == 0


# ---------------------------------------------------------------------------- help


def _all_parsers() -> list[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    return list(iter_parsers(build_parser()))


def test_every_command_has_examples(capsys: pytest.CaptureFixture[str]) -> None:
    parsers = _all_parsers()
    names = {" ".join(path) for path, _ in parsers}
    assert {"remember", "revise", "forget", "recall", "why", "diff", "history", "stats", "log",
            "log verify", "log repair", "log show", "replay", "replay rebuild", "replay verify",
            "demo"} <= names
    for path, parser in parsers:
        command = "hmem " + " ".join(path)
        assert "Examples:\n  hmem " in parser.format_help(), f"`{command}` has no examples"
        assert main([*path, "--help"]) == 0
        out, _ = capsys.readouterr()
        assert "Examples:" in out, path


def test_top_level_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    out, _ = capsys.readouterr()
    for name in ("remember", "revise", "forget", "recall", "why", "diff", "history", "stats",
                 "log", "replay", "demo"):
        assert f"\n    {name} " in out, name
    assert "hmem demo" in out and "hmem remember maya" in out
    assert main([]) == 0
    assert "First steps:" in capsys.readouterr().out


# ---------------------------------------------------------------------------- demo


def test_demo(run: Run, tmp_path: Path) -> None:
    code, out, err = run("demo", path=None)
    assert code == 0, err
    assert "Maya lives in London" in out and "Maya lives in Paris" in out
    assert "revision chain, oldest first:" in out
    assert "[superseded by #2]" in out and "world change after #1" in out
    assert "forgotten 2026-03-10T09:" in out
    assert 30 <= len(out.splitlines()) <= 70
    assert not (tmp_path / "not-this-one").exists()  # never touches $HMEM_HOME


def test_demo_with_path_keeps_the_store(run: Run, tmp_path: Path) -> None:
    kept = tmp_path / "demo"
    code, out, _ = run("demo", "--path", str(kept), path=None)
    assert code == 0 and str(kept) in out
    code, out, _ = run("history", "maya", path=kept)
    assert code == 0 and "Maya lives in Paris" in out


# ---------------------------------------------------------------------------- beside a live writer


def test_reader_cli_beside_live_writer(store: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    with Memory(store) as writer:
        fid = writer.remember("maya", "Maya lives in Lisbon")
        stats = subprocess.run(
            [sys.executable, "-m", "hmem", "stats", "--path", str(store), "--json"],
            capture_output=True, text=True, env=env, timeout=120,
        )
        assert stats.returncode == 0, stats.stderr
        assert json.loads(stats.stdout)["facts"] == 1

        writer.remember("maya", "Maya speaks Portuguese")  # appended after the reader started
        recall = subprocess.run(
            [sys.executable, "-m", "hmem", "--path", str(store), "recall", "maya lisbon"],
            capture_output=True, text=True, env=env, timeout=120,
        )
        assert recall.returncode == 0, recall.stderr
        assert "Maya lives in Lisbon (since" in recall.stdout and f"[#{fid}]" in recall.stdout

        write = subprocess.run(
            [sys.executable, "-m", "hmem", "--path", str(store), "remember", "x", "X y"],
            capture_output=True, text=True, env=env, timeout=120,
        )
        assert write.returncode == 1
        assert write.stderr.startswith("error: ") and "Traceback" not in write.stderr


def test_rebuild_progress_only_on_a_tty(
    run: Run, maya: Maya, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    code, out, err = run("replay", "rebuild")
    assert code == 0 and "rebuilt the projection from 2 events" in out
    assert "replayed 2/2 events" in err


def test_beliefs_lists_every_belief_at_a_point(run: Run, maya: Maya, store: Path) -> None:
    london, after_london, paris = maya
    now = _json(run, "beliefs")
    assert [(b["id"], b["superseded"]) for b in now] == [(london, True), (paris, False)]
    then = _json(run, "beliefs", "--as-of", str(after_london))
    assert [b["id"] for b in then] == [london]
    code, out, _ = run("beliefs", "--as-of", str(after_london), "--valid-at", "2026-06-01")
    assert code == 0 and "London" in out
    with Memory(store, read_only=True) as m:
        assert [b.id for b in m.beliefs()] == [b.id for b in m.as_of()] == [london, paris]
        assert m.beliefs(after_london) == m.as_of(after_london)


def test_a_mistyped_command_or_choice_gets_a_suggestion(run: Run) -> None:
    code, _, err = run("recal", "maya")
    assert code == 2 and "did you mean 'recall'" in err
    code, _, err = run("log", "shw")
    assert code == 2 and "did you mean 'show'" in err
    code, _, err = run("--fsync", "alwys", "stats")
    assert code == 2 and "did you mean 'always'" in err
    code, _, err = run("zzzzzz")
    assert code == 2 and "did you mean" not in err and "invalid choice" in err


def test_errors_under_json_are_json_on_stdout(run: Run, maya: Maya) -> None:
    code, out, err = run("why", "999", "--json")
    assert code == 1 and err.startswith("error: no fact 999")
    assert json.loads(out) == {"error": {"type": "FactNotFound", "message": err[7:].strip()}}
    code, out, _ = run("recal", "maya", "--json")
    got = json.loads(out)["error"]
    assert code == 2 and got["type"] == "UsageError" and "did you mean 'recall'" in got["message"]
    code, out, _ = run("why", "999")
    assert code == 1 and out == ""  # without --json, nothing on stdout


def test_valid_times_show_the_time_of_day_when_there_is_one(run: Run) -> None:
    code, out, _ = run("remember", "maya", "Maya lives in Rome", "--valid-from",
                       "2026-03-10T14:05:00Z")
    fid = out.strip()
    code, out, _ = run("revise", fid, "Maya lives in Oslo", "--valid-from", "2026-04-01")
    code, out, err = run("why", out.strip())
    assert code == 0, err
    assert "valid 2026-03-10T14:05Z to 2026-04-01" in out
    assert "valid since 2026-04-01 " in out


def test_mcp_help_shows_the_uvx_form_that_works(run: Run) -> None:
    code, out, _ = run("mcp", "--help", path=None)
    assert code == 0 and 'uvx --from "hmem[mcp] @ file://$PWD" hmem mcp' in out
    assert "-- uvx hmem mcp" not in out  # plain uvx installs hmem without the MCP SDK


def test_a_write_says_whether_it_was_stored_a_repeat_or_a_retry(run: Run) -> None:
    assert _json(run, "remember", "tom", "Tom runs", "--request-id", "r2")["outcome"] == "new"
    assert _json(run, "remember", "tom", "Tom runs", "--request-id", "r2") == {
        "id": 1, "repeat": True, "outcome": "retry"}
    assert _json(run, "remember", "Tom", "tom runs!") == {"id": 1, "repeat": True,
                                                          "outcome": "repeat"}
    code, out, _ = run("remember", "tom", "Tom runs", "--request-id", "r2")
    assert code == 0 and "this --request-id was written before" in out
    code, out, _ = run("remember", "tom", "Tom runs")
    assert code == 0 and "same subject and text" in out


def test_a_time_without_a_zone_gets_a_hint_a_shell_user_can_type(run: Run, maya: Maya) -> None:
    code, out, err = run("beliefs", "--as-of", "2026-03-10T14:05")
    assert code == 1 and out == ""
    assert "has no time zone" in err and "'2025-01-01T09:30:00+02:00'" in err
    assert "datetime(" not in err and "tzinfo" not in err
    code, out, _ = run("beliefs", "--as-of", "2026-03-10T14:05", "--json")
    assert code == 1 and "datetime(" not in out and "+02:00" in out
    with pytest.raises(InvalidTime, match=r"datetime\(\.\.\., tzinfo=timezone\.utc\)"):
        parse_time("2026-03-10T14:05", "as_of")  # the library keeps its Python hint


def test_an_empty_stores_stats_say_the_log_is_empty(run: Run, store: Path) -> None:
    Memory(store, embedder=None).close()
    code, out, err = run("stats")
    assert code == 0, err
    head = next(line for line in out.splitlines() if line.startswith("log head"))
    assert head == "log head    empty (no event logged yet)"
    assert _json(run, "stats")["head_seq"] == 0


def test_mcp_on_a_server_store_announces_the_redacted_url_not_a_cache_directory(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from types import SimpleNamespace

    from hmem.adapters import mcp_tools
    from tests.support.pg_support import fresh_store_url

    url = fresh_store_url()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(mcp_tools, "build_server",  # the announcement, without stdio
                        lambda *a, **k: SimpleNamespace(run=lambda transport: None))
    with Memory(url, embedder=None, shared=True) as m:
        mcp_tools.serve(m)
        cache = str(m.path)
    said = capsys.readouterr().err
    shown = url.split("://", 1)[1].split("@")[-1].split("?")[0]  # host, port and database
    assert said.startswith("hmem mcp: serving postgresql://") and shown in said, said
    assert cache not in said
    password = url.split("://", 1)[1].split("@")[0].partition(":")[2]
    assert not password or password not in said
