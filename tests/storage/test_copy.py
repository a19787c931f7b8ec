"""``hmem copy SRC DST``: a store copied between the embedded and the PostgreSQL
backends, both ways, answers as the source did; every event keeps its seq, times, request id
and provenance; an erasure stays an erasure; the destination must be empty; a copy that does
not read back as the source is refused."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from hmem import Memory, errors
from hmem.storage.copy import copy_store
from tests.support.backends import new_store, second_clock

ROOT = Path(__file__).resolve().parents[2]


def _fill(where: str) -> dict[str, Any]:
    """Every kind of event, an erasure among them; returns what a reader should see."""
    with Memory(where, embedder="hash-8", embed_mode="inline", clock=second_clock(),
                log_recalls=True) as m:
        a = m.remember("maya", "Maya lives in London", valid_from="2024-01-01",
                       request_id="r-1", source_agent="chat", source_ref="s1:3")
        m.revise(a, "Maya lives in Paris", valid_from="2025-05-01", reason="moved")
        c = m.in_namespace("work").remember("tom", "Tom likes tea")
        m.in_namespace("work").forget(c, reason="wrong")
        secret = m.remember("zoe", "Zoe's secret diagnosis")
        if not where.startswith("postgresql"):  # erasure is not available on a server yet
            m.erase(fact=secret, reason="asked")
        m.recall("where does maya live")  # logged
    with Memory(where, embedder="hash-8", read_only=True) as m:
        return _seen(m)


def _seen(m: Memory) -> dict[str, Any]:
    return {
        "last_seq": m.last_seq,
        "recall": [(h.id, h.text) for h in m.recall("maya paris zoe secret").hits],
        "as_of": [(f.id, f.text) for f in m.as_of(2)],
        "why": [(e.seq, type(e).__name__) for e in m.why(m.history("maya")[-1].id).events],
        "work": [(f.id, f.text) for f in m.in_namespace("work").history("tom")],
        "events": m.sql("SELECT seq, type, tx_at, request_id, source_agent, source_ref "
                        "FROM events ORDER BY seq").fetchall(),
        "ok": m.verify().ok,
    }


@pytest.fixture(params=[("file", "postgres"), ("postgres", "file"), ("file", "file")],
                ids=lambda p: "-to-".join(p))
def stores(request: pytest.FixtureRequest) -> Iterator[tuple[str, str]]:
    src, dst = request.param
    with new_store(src) as a, new_store(dst) as b:
        yield a, b


def test_a_copy_answers_as_its_source(stores: tuple[str, str]) -> None:
    src, dst = stores
    want = _fill(src)
    report = copy_store(src, dst)
    assert report.events == want["last_seq"]
    with Memory(dst, embedder="hash-8", read_only=True) as m:
        assert _seen(m) == want
    with Memory(src, embedder="hash-8", read_only=True) as m:
        assert m.last_seq == want["last_seq"]  # the source is left as it was


def test_an_erasure_stays_an_erasure(tmp_path: Path) -> None:
    """Erased in the source: its text is in no table and no log of any copy, either way."""
    src = str(tmp_path / "src")
    _fill(src)
    with new_store("postgres") as url:
        copy_store(src, url)
        back = str(tmp_path / "back")
        copy_store(url, back)
        from tests.support.pg_support import psycopg

        with psycopg.connect(url) as con:
            dump = [bytes(r[0]) for r in con.execute("SELECT payload FROM hmem_log")]
            dump += [str(r).encode() for r in con.execute("SELECT * FROM hmem_facts")]
        assert not any(b"diagnosis" in blob for blob in dump)
    for path in (tmp_path / "back").rglob("*"):
        if path.is_file():
            assert b"diagnosis" not in path.read_bytes(), path
    with Memory(back, embedder="hash-8") as m:
        assert m.verify().ok
        assert "diagnosis" not in str(m.sql("SELECT text FROM facts").fetchall())


def test_the_destination_must_be_empty(tmp_path: Path) -> None:
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    _fill(a)
    with Memory(b, embedder=None) as m:
        m.remember("x", "already here")
    with pytest.raises(errors.InvalidInput, match="already holds 1 events"):
        copy_store(a, b)
    with pytest.raises(errors.InvalidInput, match="same store"):
        copy_store(a, a)
    with pytest.raises(errors.StoreNotFound):
        copy_store(tmp_path / "nothing", tmp_path / "c")
    with Memory(b, embedder=None, read_only=True) as m:
        assert m.last_seq == 1


def test_a_copy_that_does_not_read_back_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import eventlog.log as file_log

    a = str(tmp_path / "a")
    _fill(a)
    real = file_log.EventLog.read

    def read(self: Any, from_seq: int = 1, to_seq: int | None = None) -> Any:
        for ev in real(self, from_seq, to_seq):  # the destination's log reads back wrong
            wrong = "dst" in str(self.directory) and ev.seq == 3
            yield msgspec.structs.replace(ev, namespace="elsewhere") if wrong else ev

    monkeypatch.setattr(file_log.EventLog, "read", read)
    with pytest.raises(errors.CopyFailed, match="event 3 did not arrive"):
        copy_store(a, tmp_path / "dst")


def test_the_cli_copies_both_ways(tmp_path: Path) -> None:
    src = str(tmp_path / "src")
    want = _fill(src)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with new_store("postgres") as url:
        for a, b in ((src, url), (url, str(tmp_path / "back"))):
            done = subprocess.run([sys.executable, "-m", "hmem", "copy", a, b, "--json"],
                                  env=env, text=True, capture_output=True, timeout=120)
            assert done.returncode == 0, done.stderr
            report = json.loads(done.stdout)
            assert report["events"] == want["last_seq"] and report["destination"] == b
    with Memory(str(tmp_path / "back"), embedder="hash-8", read_only=True) as m:
        assert _seen(m) == want


def test_an_erasure_waits_for_a_running_copy(tmp_path: Path) -> None:
    """A copy reads its source as a registered reader: an erasure asked for meanwhile is
    refused (ReadersOpen), and the copy ends whole and openable."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    with Memory(src, embedder=None) as m:
        for i in range(3):
            m.remember("alice", f"Alice's code is {i}")
    refused: list[BaseException] = []

    def midway(done: int, total: int) -> None:
        with Memory(src, embedder=None) as w:
            try:
                w.erase(subject="alice")
            except errors.ReadersOpen as e:
                refused.append(e)

    copy_store(src, dst, progress=midway)
    assert refused
    with Memory(dst, read_only=True, embedder=None) as c:
        assert len(c.history("alice")) == 3


def test_a_source_whose_erasure_was_cut_short_is_not_copied(tmp_path: Path) -> None:
    """Its derived files may still hold what the erasure named: the copy is refused until its
    writer opens once (and finishes the erasure)."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    with Memory(src, embedder=None) as m:
        m.remember("alice", "Alice's code is 4815")
        m.store.log.sealer.keys.mark(erasing=True)  # as a crash mid-erasure leaves it
    with pytest.raises(errors.ErasureUnfinished):
        copy_store(src, dst)
    assert not (dst / "log").exists() or not any((dst / "log").iterdir())
