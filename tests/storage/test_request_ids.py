"""Idempotent retries: a write given a client's ``request_id`` is made once, however
often it is retried, from whichever process, across reopen; the same id for another write is
refused, writing nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hmem import Memory
from hmem.errors import (
    AlreadyWritten,
    FactAlreadyForgotten,
    FactSuperseded,
    InvalidInput,
    RequestIdReused,
)
from projections.checkpoint import CHECKPOINT_FILE


@pytest.fixture
def mem(tmp_path: Path):
    with Memory(tmp_path / "s", embedder=None) as m:
        yield m


def test_a_retried_remember_is_stored_once_even_without_dedup(mem: Memory) -> None:
    first = mem.remember("maya", "Maya lives in Paris", dedup=False, request_id="r-1")
    seq = mem.last_seq
    assert mem.remember("maya", "Maya lives in Paris", dedup=False, request_id="r-1") == first
    assert mem.last_seq == seq  # nothing written
    # without a request id the same call is a new fact (dedup off): the id is what held it back
    assert mem.remember("maya", "Maya lives in Paris", dedup=False) != first
    assert [ev.request_id for ev in mem.store.log.read() if ev.seq == first] == ["r-1"]


@pytest.mark.parametrize("dedup", [True, False])
def test_a_retried_batch_answers_every_item_as_the_first_call_did(mem: Memory, dedup) -> None:
    old = mem.remember("tom", "Tom likes tea")
    items = [{"subject": "maya", "text": "Maya likes chess"},
             {"subject": "tom", "text": "Tom likes tea"},
             {"subject": "maya", "text": "Maya likes chess"},
             {"subject": "bo", "text": "Bo plays drums"}]
    first = mem.remember_many(items, dedup=dedup, request_id="batch-7")
    seq = mem.last_seq
    assert mem.remember_many(items, dedup=dedup, request_id="batch-7") == first
    assert mem.last_seq == seq
    if dedup:
        assert first[1] == old and first[0] == first[2]
    else:
        assert len(set(first)) == 4 and old not in first


def test_a_retried_revise_or_forget_returns_its_first_answer(mem: Memory) -> None:
    fid = mem.remember("maya", "Maya lives in Paris", valid_from="2025-01-01")
    new = mem.revise(fid, "Maya lives in Rome", valid_from="2026-01-01", request_id="rev")
    seq = mem.last_seq
    assert mem.revise(fid, "Maya lives in Rome", valid_from="2026-01-01", request_id="rev") == new
    with pytest.raises(FactSuperseded):  # a second revise of the old version is still refused
        mem.revise(fid, "Maya lives in Rome", request_id="another")
    tomb = mem.forget(new, request_id="fg")
    assert mem.forget(new, request_id="fg") == tomb
    assert mem.last_seq == seq + 1
    with pytest.raises(FactAlreadyForgotten):
        mem.forget(new)


def test_a_request_id_reused_for_another_write_is_refused_writing_nothing(mem: Memory) -> None:
    fid = mem.remember("maya", "Maya lives in Paris", request_id="r")
    other = mem.remember("tom", "Tom likes tea")
    seq = mem.last_seq
    for call in (
        lambda: mem.remember("maya", "Maya lives in Oslo", request_id="r"),
        lambda: mem.remember_many([{"subject": "maya", "text": "Maya lives in Paris"},
                                   {"subject": "bo", "text": "Bo plays drums"}],
                                  dedup=False, request_id="r"),
        lambda: mem.revise(other, "Tom likes coffee", request_id="r"),
        lambda: mem.forget(other, request_id="r"),
        lambda: mem.forget(fid, request_id="r"),
    ):
        with pytest.raises(RequestIdReused, match="'r' already names"):
            call()
    assert mem.last_seq == seq
    with pytest.raises(AlreadyWritten, match="seq 1"):  # a raw transaction is told, not answered
        with mem.transaction() as txn:
            txn.append(mem.store.log.read(1, 1).__next__())


@pytest.mark.parametrize("bad", ["", "  ", "a\nb", "x" * 501, 7])
def test_a_bad_request_id_is_invalid_input(mem: Memory, bad) -> None:
    for call in (lambda: mem.remember("maya", "Maya swims", request_id=bad),
                 lambda: mem.forget(1, request_id=bad)):
        with pytest.raises(InvalidInput, match="request_id"):
            call()
    assert mem.last_seq == 0


def test_request_ids_are_per_namespace(mem: Memory) -> None:
    a = mem.remember("maya", "Maya swims", request_id="same")
    b = mem.in_namespace("work").remember("maya", "Maya swims", request_id="same")
    assert a != b


@pytest.mark.parametrize("shared", [False, True])
@pytest.mark.parametrize("loaded_from", ["checkpoint", "replay"])
def test_a_retry_after_reopen_is_recognised_however_the_store_loads(
    tmp_path, loaded_from, shared
) -> None:
    path = tmp_path / "s"
    with Memory(path, embedder=None) as m:
        ids = [m.remember("maya", f"Maya note {i}", dedup=False, request_id=f"n{i}")
               for i in range(5)]
    if loaded_from == "replay":
        (path / CHECKPOINT_FILE).unlink()
    with Memory(path, embedder=None, shared=shared) as m:
        assert [m.remember("maya", f"Maya note {i}", dedup=False, request_id=f"n{i}")
                for i in range(5)] == ids
        assert m.last_seq == 5


RETRIER = """
import sys
from hmem import Memory
with Memory(sys.argv[1], shared=True, embedder=None) as m:
    print(m.remember("maya", "Maya joined the team", dedup=False, request_id=sys.argv[2]))
"""


def test_processes_racing_one_request_id_write_it_once(tmp_path: Path) -> None:
    """Four shared writers send the same request at once (a client retrying through several
    servers): one write, and every one of them answers its id."""
    store = tmp_path / "s"
    with Memory(store, shared=True, embedder=None) as m:
        m.remember("tom", "Tom likes tea")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    procs = [subprocess.Popen([sys.executable, "-c", RETRIER, str(store), "req-42"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for _ in range(4)]
    answers = set()
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        answers.add(int(out))
    assert answers == {2}
    with Memory(store, read_only=True) as r:
        assert r.stats().facts == 2
        assert r.verify().ok


def test_a_request_id_for_the_same_text_about_another_subject_is_reused(mem: Memory) -> None:
    """A retry is the same write: the subject counts as much as the text."""
    mem.remember("maya", "likes chess", request_id="r-9")
    seq = mem.last_seq
    with pytest.raises(RequestIdReused):
        mem.remember("tom", "likes chess", request_id="r-9")
    with pytest.raises(RequestIdReused):
        mem.remember_many([{"subject": "tom", "text": "likes chess"}], request_id="r-9")
    assert mem.last_seq == seq


@pytest.mark.parametrize("again", ["another write", "the same write"])
def test_a_request_id_whose_write_was_erased_is_refused_for_any_write(mem: Memory, again) -> None:
    """Its words are gone, so no retry can be told from another write: nothing is dropped
    silently, the id is refused (and names the erasure)."""
    fid = mem.remember("alice", "Alice's code is 4815", request_id="r-5")
    new = mem.revise(fid, "Alice's code is 1623", request_id="r-6")
    mem.erase(subject="alice")
    seq = mem.last_seq
    text = "Alice's code is 4815" if again == "the same write" else "Bob likes tea"
    with pytest.raises(RequestIdReused, match="erased"):
        mem.remember("alice" if again == "the same write" else "bob", text, request_id="r-5")
    with pytest.raises(RequestIdReused, match="erased"):
        mem.remember_many([{"subject": "bob", "text": text}], request_id="r-5")
    with pytest.raises((RequestIdReused, InvalidInput)):
        mem.revise(new, "anything", request_id="r-6")
    assert mem.last_seq == seq
