"""The ``log`` commands and ``stats`` on a store on PostgreSQL, run in-process through
``main([...])``: ``log verify`` reads every row of ``hmem_log`` through the chain (and its
``tx_us`` column, and the triggers that keep it append-only), ``log show`` and ``stats`` read
through the store's Log, and ``log repair`` is refused with the reason."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from eventlog.format import chain_next
from hmem import Memory, errors
from hmem.adapters.cli import main
from hmem.adapters.usage import UsageLog
from hmem.storage.targets import repair_log_at
from tests.support.pg_support import fresh_store_url, psycopg

Run = Callable[..., tuple[int, str, str]]


@pytest.fixture
def url() -> str:
    return fresh_store_url()


@pytest.fixture
def run(url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Run:
    """Run ``hmem --path URL ARGS...``; returns (exit code, stdout, stderr)."""
    monkeypatch.delenv("HMEM_NAMESPACE", raising=False)

    def _run(*args: str) -> tuple[int, str, str]:
        code = main(["--path", url, "--embedder", "none", *args])
        out, err = capsys.readouterr()
        return code, out, err

    return _run


def _json(run: Run, *args: str) -> Any:
    code, out, err = run(*args, "--json")
    return code, json.loads(out)


@pytest.fixture
def two_facts(run: Run) -> Iterator[None]:
    assert run("remember", "maya", "Maya lives in London")[0] == 0
    assert run("remember", "tom", "Tom likes tea")[0] == 0
    yield


def tamper(url: str, statement: str, *params: Any) -> None:
    """Run ``statement`` on hmem_log as its owner, past the trigger that refuses it."""
    with psycopg.connect(url, autocommit=True) as con:
        con.execute("ALTER TABLE hmem_log DISABLE TRIGGER hmem_log_no_change")
        con.execute(statement, params)
        con.execute("ALTER TABLE hmem_log ENABLE TRIGGER hmem_log_no_change")


def test_log_verify_show_and_stats_read_a_server_store(
    run: Run, two_facts: None, tmp_path: Path
) -> None:
    code, shown, _ = run("log", "show")
    assert code == 0 and "Maya lives in London" in shown and "Tom likes tea" in shown
    code, stats = _json(run, "stats")
    assert code == 0 and stats["facts"] == 2
    code, report = _json(run, "log", "verify")
    assert code == 0 and report["ok"] and report["events"] == 2
    assert report["head"] == f"{stats['head_seq']}:{stats['head_hash']}"
    assert report["table"].startswith("hmem_log in database")
    code, out, _ = run("log", "verify", "--expect", report["head"])
    assert code == 0 and "the log holds it" in out
    code, out, _ = run("log", "verify", "--expect", "2:" + "0" * 32)
    assert code == 1 and "was rewritten" in out
    code, out, _ = run("log", "verify", "--expect", "3:" + "0" * 32)
    assert code == 1 and "events were removed" in out
    key, witness = str(tmp_path / "key"), str(tmp_path / "witness.jsonl")
    assert run("log", "keygen", key)[0] == 0
    assert run("log", "checkpoint", "--key", key, "--witness", witness)[0] == 0
    code, report = _json(run, "log", "verify", "--key", key, "--witness", witness)
    assert code == 0 and report["checkpoints"] == 1 and report["witness_problems"] == []


def test_log_verify_names_the_first_row_that_breaks_the_chain(
    url: str, run: Run, two_facts: None
) -> None:
    tamper(url, "UPDATE hmem_log SET payload = overlay(payload placing 'X'::bytea "
                "from length(payload) - 3 for 1) WHERE seq = 2")
    code, report = _json(run, "log", "verify")
    assert code == 1 and not report["ok"]
    assert (report["events"], report["offset"], report["problem"]) == (
        1, 2, "the hash chain does not hold")
    code, out, _ = run("log", "verify")
    assert code == 1 and "corrupted: the hash chain does not hold in hmem_log" in out
    assert "at seq 2" in out and "restore the database from a backup" in out


def test_log_verify_finds_a_row_that_holds_no_event_even_when_its_chain_was_redone(
    url: str, run: Run, two_facts: None
) -> None:
    """A rewriter who recomputes the chain over junk gets past the chain, not the decoder."""
    with psycopg.connect(url) as con:
        before = bytes(con.execute("SELECT chain FROM hmem_log WHERE seq = 1").fetchone()[0])
    junk = b"\xc1 not msgpack"
    tamper(url, "UPDATE hmem_log SET payload = %s, chain = %s WHERE seq = 2",
           junk, chain_next(before, junk))
    code, report = _json(run, "log", "verify")
    assert code == 1 and report["offset"] == 2 and report["problem"].startswith("it holds no event")
    with pytest.raises(errors.ServerLogCorrupted, match="at seq 2: it holds no event"):
        with Memory(url, embedder=None, read_only=True) as m:
            list(m.store.log.read())


def test_log_verify_holds_the_tables_other_columns_and_its_guards(
    url: str, run: Run, two_facts: None
) -> None:
    tamper(url, "UPDATE hmem_log SET tx_us = tx_us - 1000000 WHERE seq = 2")
    code, report = _json(run, "log", "verify")
    assert code == 1 and report["problem"] == "" and report["events"] == 2
    assert [p.split(" (")[0] for p in report["table_problems"]] == [
        "1 row(s) of hmem_log hold a tx_us that is not their event's time"]
    with psycopg.connect(url, autocommit=True) as con:
        con.execute("ALTER TABLE hmem_log DISABLE TRIGGER hmem_log_no_truncate")
        con.execute("DROP TRIGGER hmem_log_no_change ON hmem_log")
    code, out, _ = run("log", "verify")
    assert code == 1 and out.startswith("FAILED: 2 events in hmem_log")
    assert "hmem_log_no_change, which refuses UPDATE and DELETE of hmem_log, is missing" in out
    assert "hmem_log_no_truncate, which refuses TRUNCATE of hmem_log, is disabled" in out


def test_log_repair_on_a_url_is_refused_saying_why(url: str, run: Run, two_facts: None) -> None:
    secret = url.replace("postgresql://hmem@", "postgresql://hmem:s3cret@", 1)
    with pytest.raises(errors.RepairUnavailable, match="not repaired in place") as refused:
        repair_log_at(secret)
    assert "s3cret" not in str(refused.value) and "restore the database" in str(refused.value)
    code, _, err = run("log", "repair")
    assert code == 1 and "not repaired in place" in err and "Traceback" not in err


def test_stats_usage_reads_the_usage_log_this_host_keeps_for_a_server_store(
    url: str, run: Run, two_facts: None
) -> None:
    with Memory(url, embedder=None) as m:  # where `hmem mcp --usage-log` writes it
        UsageLog(m.path).record("recall")
    code, summary = _json(run, "stats", "--usage")
    assert code == 0 and [(op["op"], op["calls"]) for op in summary["ops"]] == [("recall", 1)]


def test_erase_on_a_url_then_log_show_shows_the_receipt_where_the_text_was(
    run: Run, two_facts: None
) -> None:
    code, shown, _ = run("log", "show")
    assert code == 0 and "Maya lives in London" in shown  # opened with the store's key file
    code, out, _ = run("erase", "--subject", "maya")
    assert code == 0 and "would erase" in out
    code, receipt = _json(run, "erase", "--subject", "maya", "--yes", "--by", "dpo")
    assert code == 0 and receipt["by"] == "dpo" and receipt["facts"] == 1
    code, shown, _ = run("log", "show")
    assert code == 0 and "London" not in shown and "receipt: subject erased" in shown
    assert "Tom likes tea" in shown
    assert run("log", "verify")[0] == 0
