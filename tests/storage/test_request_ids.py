"""Idempotent retries: a write given a client's ``request_id`` is made once, however
often it is retried, from whichever process, across reopen; the same id for another write is
refused, writing nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from eventlog.events import FactRemembered
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
        with pytest.raises(InvalidInput, match="^request_id (is|has|must|'a)"):
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
from eventlog.events import FactRemembered
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


def test_a_retried_batch_answers_a_repeated_item_as_the_first_call_did_after_its_fact_is_gone(
    mem: Memory,
) -> None:
    """An item that repeated an earlier item of the same call is answered with that item's id
    (from the first call's events), not by asking whether a current fact repeats it now."""
    items = [{"subject": "maya", "text": "Maya likes chess"},
             {"subject": "maya", "text": "Maya likes chess"}]
    first = mem.remember_many(items, request_id="b-1")
    assert first[0] == first[1]
    mem.forget(first[0])
    seq = mem.last_seq
    assert mem.remember_many(items, request_id="b-1") == first
    assert mem.last_seq == seq


CALLS_ON_A_USED_ID = {
    # a remember given the id of a revise
    "remember, the id of a revise": (
        lambda m: m.remember("maya", "Maya lives in Rome", request_id="rev"),
        "'rev' already names a revise or forget (seq 2)"),
    # a retry of a batch that leaves out one of its items
    "remember_many, fewer items": (
        lambda m: m.remember_many([{"subject": "tom", "text": "Tom likes tea"}],
                                  request_id="many"),
        "'many' already names other facts (seq 3, 4)"),
    "remember, another text": (
        lambda m: m.remember("maya", "Maya lives in Oslo", request_id="rem"),
        "'rem' already names other facts (seq 1)"),
    # the same fact, another text
    "revise, another text": (
        lambda m: m.revise(1, "Maya lives in Lima", request_id="rev"),
        "'rev' already names another write (seq 2)"),
    "forget, the id of a revise": (
        lambda m: m.forget(1, request_id="rev"),
        "'rev' already names another write (seq 2)"),
    "remember_many, a write since erased": (
        lambda m: (m.erase(subject="bo"), m.remember_many(
            [{"subject": "tom", "text": "Tom likes tea"},
             {"subject": "bo", "text": "Bo plays drums"}], request_id="many")),
        "'many' already names a write that was erased (seq 3, 4)"),
}


@pytest.mark.parametrize("case", list(CALLS_ON_A_USED_ID))
def test_a_reused_request_id_is_refused_naming_what_it_names_and_its_seqs(
    mem: Memory, case: str
) -> None:
    fid = mem.remember("maya", "Maya lives in Paris", request_id="rem")
    assert mem.revise(fid, "Maya lives in Rome", request_id="rev") == 2
    assert mem.remember_many([{"subject": "tom", "text": "Tom likes tea"},
                              {"subject": "bo", "text": "Bo plays drums"}],
                             request_id="many") == [3, 4]
    call, message = CALLS_ON_A_USED_ID[case]
    with pytest.raises(RequestIdReused) as refused:
        call(mem)
    assert str(refused.value).startswith(f"request id {message}; nothing was written")


def test_a_retried_batch_whose_facts_were_embedded_inline_answers_as_the_first_call_did(
    tmp_path: Path,
) -> None:
    """The first call logged each fact's vector right after it, so the events of the write it
    names are not adjacent: the retry reads past the vectors, it does not count them."""
    with Memory(tmp_path / "s", embedder="hash-64", embed_mode="inline") as m:
        items = [{"subject": "maya", "text": "Maya likes chess"},
                 {"subject": "bo", "text": "Bo plays drums"}]
        first = m.remember_many(items, request_id="b-2")
        seq = m.last_seq
        assert seq == 4  # fact, vector, fact, vector
        assert m.remember_many(items, request_id="b-2") == first
        assert m.last_seq == seq


def test_a_transaction_is_told_of_a_used_request_id_on_any_of_its_events(mem: Memory) -> None:
    mem.remember("maya", "Maya likes chess", request_id="r-1")
    seq = mem.last_seq
    with pytest.raises(AlreadyWritten, match="'r-1'"):
        with mem.transaction() as txn:
            txn.append(FactRemembered(subject="tom", text="Tom likes tea"))
            txn.append(FactRemembered(subject="maya", text="Maya likes chess", request_id="r-1"))
    assert mem.last_seq == seq
