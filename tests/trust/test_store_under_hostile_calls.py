"""What an outside attack broke, one test per finding, each failing before its fix.

The numbers are the issue's: 1 vector sizes, 2 a damaged projection file, 3 readers and
batches, 4 the namespace wall's metadata, 5 m.sql, 6 times beyond the years 1-9999, 7 MCP and
lone surrogates, 8 raw errors, 9 terminal escapes, 10 permissions, 11 tamper evidence,
12 an exact lookup against borrowed matches, 13 derived data refusing valid input. Here: 1, 2,
3, 5, 6, 8, 13; items 4, 10 and 11 are in test_trust_round2_evidence.py, 7 and 9 in
test_trust_adapters.py, 12 in test_ranking_exact.py.
"""

from __future__ import annotations

import base64
import os
import random
import shutil

import numpy as np
import pytest

from hmem import Memory
from hmem.errors import EmbedderError, InvalidInput, InvalidTime


@pytest.fixture
def store(tmp_path):
    return tmp_path / "store"


# ---------------------------------------------------------------------- 1. vector sizes


def test_a_vector_of_another_size_is_refused_before_anything_is_written(store):
    with Memory(store, embedder=None) as m:
        a, b = m.remember("a", "alpha fact"), m.remember("b", "beta fact")
        m.recall("alpha")  # the recall index exists: the old bug then failed after appending
        m.record_embedding(a, "m", [1, 2, 3])
        before = m.last_seq
        with pytest.raises(InvalidInput, match="3-dimensional"):
            m.record_embedding(b, "m", [1, 2])
        assert m.last_seq == before
        other = m.in_namespace("other")  # each namespace fixes its own models' sizes
        c = other.remember("c", "gamma fact")
        assert other.record_embedding(c, "m", [1, 2]) > before
        assert m.recall("alpha")[0].id == a
    with Memory(store, embedder=None) as m, Memory(store, read_only=True, embedder=None) as r:
        assert m.recall("beta")[0].id == b and r.recall("alpha")[0].id == a


def test_a_log_that_already_holds_mixed_sizes_opens_and_recalls(store):
    """A log written before the rule (or by hand) must not break recall in any namespace."""
    from datetime import datetime, timezone

    from eventlog.events import EmbeddingRecorded, FactRemembered
    from eventlog.log import EventLog

    t = datetime(2026, 1, 1, tzinfo=timezone.utc)
    with EventLog(store / "log") as log:
        log.append_many([
            FactRemembered(tx_at=t, subject="a", text="alpha fact"),
            FactRemembered(tx_at=t, subject="b", text="beta fact"),
            EmbeddingRecorded(tx_at=t, fact_id=1, model="m", dims=3,
                              vector=np.ones(3, "<f4").tobytes()),
            EmbeddingRecorded(tx_at=t, fact_id=2, model="m", dims=2,
                              vector=np.ones(2, "<f4").tobytes()),
        ])
    with Memory(store, embedder=None) as m:
        assert m.recall("beta")[0].id == 2
        assert m.verify().ok


def test_an_embedder_whose_size_changed_is_a_typed_error_before_writing(store):
    from hmem.embedders import HashEmbedder

    with Memory(store, embedder=HashEmbedder(8, model="same")) as m:
        m.remember("a", "alpha fact")
    with Memory(store, embedder=HashEmbedder(16, model="same")) as m:
        before = m.last_seq
        with pytest.raises(EmbedderError, match="8 dims but the embedder makes 16"):
            m.remember("b", "beta fact")
        with pytest.raises(EmbedderError):
            m.recall("alpha")
        assert m.last_seq == before


# ---------------------------------------------------------------------- 2. a damaged projection


def _flip(path, rng):
    size = path.stat().st_size
    with open(path, "r+b") as f:
        offset = rng.randrange(size)
        f.seek(offset)
        byte = f.read(1)[0]
        f.seek(offset)
        f.write(bytes([byte ^ (1 << rng.randrange(8))]))


def test_a_flipped_bit_in_the_checkpoint_is_never_believed(tmp_path):
    src = tmp_path / "src"
    with Memory(src, embedder="hash") as m:
        m.remember_many(
            {"subject": f"s{i % 20}", "text": f"fact number {i} about Topic{i % 7}"}
            for i in range(1500)
        )
        m.flush()
        want = [h.id for h in m.recall("fact number 5")]
    rng = random.Random(12)
    for trial in range(12):
        d = tmp_path / f"t{trial}"
        shutil.copytree(src, d)
        _flip(d / "checkpoint.columns", rng)
        with Memory(d, embedder="hash") as m:
            m.stats()
            assert m.sql("SELECT count(*) FROM facts").fetchall() == [(1500,)]
            assert len(m.events().fetchall()) == 3000
            assert [h.id for h in m.recall("fact number 5")] == want
            assert m.verify().ok
        shutil.rmtree(d)


# ---------------------------------------------------------------------- 6. times beyond 1-9999


@pytest.mark.parametrize("when", [
    "9999-12-31T23:00:00-05:00", "0001-01-01T01:00:00+05:00",
])
def test_a_time_whose_utc_leaves_the_years_1_to_9999_is_invalid_time(store, when):
    from datetime import datetime

    with Memory(store, embedder=None) as m:
        m.remember("a", "alpha")
        calls = [
            lambda: m.remember("a", "beta", valid_from=when),
            lambda: m.as_of(when),
            lambda: m.recall("alpha", as_of=when),
            lambda: m.recall("alpha", valid_at=when),
            lambda: m.recall("alpha", reference_time=when),
            lambda: m.diff(when),
            lambda: m.as_of(datetime.fromisoformat(when)),
        ]
        for call in calls:
            with pytest.raises(InvalidTime, match="years 1-9999"):
                call()
        assert m.last_seq == 1


# ---------------------------------------------------------------------- 8. raw errors


def test_hostile_library_calls_are_typed_errors_and_write_nothing(tmp_path):
    store = tmp_path / "s"
    with Memory(store, embedder=None) as m:
        a = m.remember("a", "alpha")
        before = m.last_seq
        bad = [
            lambda: m.record_embedding(a, "m", "abc"),
            lambda: m.record_embedding(a, "m", np.ones(20_000_000, dtype=np.float32)),
            lambda: m.remember("s", "t", entities=[f"name {i}" for i in range(5000)]),
            lambda: m.remember_many(["a", "b"]),
            lambda: m.remember_many("ab"),
            lambda: m.snapshot(parquet=tmp_path / "missing" / "x.parquet"),
            lambda: m.history(None),
            lambda: m.history(1),
            lambda: m.events(subject=3),
            lambda: m.tx_time("1"),
            lambda: m.recall("alpha", limit="5"),
            lambda: m.recall("alpha", max_tokens=0),
            lambda: m.recall("alpha", subject=5),
            lambda: m.recall("alpha", as_of=[1]),
            lambda: m.remember("s", "t", confidence=float("nan")),
            lambda: m.remember("s", "t", confidence="0.5"),
            lambda: m.remember("s\ud800", "t"),
            lambda: m.recall("alpha \ud800"),
        ]
        for call in bad:
            with pytest.raises(InvalidInput):
                call()
        assert m.last_seq == before
        # numpy numbers are numbers: accepted, stored as plain floats
        b = m.remember("s", "t", confidence=np.float64(0.5))
        c = m.remember("s", "u", confidence=np.float32(0.25))
        assert (m.get(b).confidence, m.get(c).confidence) == (0.5, 0.25)
    with pytest.raises(InvalidInput, match="fsync"):
        Memory(tmp_path / "t", fsync="bogus")
    assert not (tmp_path / "t").exists()


def test_a_lone_surrogate_never_reaches_an_embedder(store):
    class Strict:
        model, dims = "strict", 4

        def embed(self, texts):
            for t in texts:
                t.encode("utf-8")  # what a real tokenizer does first: raises on a surrogate
            return np.ones((len(texts), 4), dtype=np.float32) / 2

    with Memory(store, embedder=Strict()) as m:
        m.remember("a", "alpha")
        for call in (lambda: m.remember("s\udc00", "text"), lambda: m.remember("s", "t\ud800"),
                     lambda: m.recall("alpha \udfff")):
            with pytest.raises(InvalidInput, match="surrogate"):
                call()


# ---------------------------------------------------------------------- 13. derived data


def test_derived_entities_never_refuse_a_valid_turn(store):
    blob = "Q" + base64.b64encode(os.urandom(1140)).decode().replace("/", "x").replace("+", "y")
    long_name = " ".join(f"Name{i}" for i in range(300))  # a run of capitalised words
    with Memory(store, embedder=None) as m:
        a = m.remember("user", f"here is the file: {blob} and Alice saw it")
        b = m.remember("user", long_name)
        many = m.remember("user", " and ".join(f"Person{i} Smith" for i in range(200)))
        assert "alice" in m.get(a).entities
        assert all(len(e) <= 100 for e in m.get(b).entities)
        assert len(m.get(many).entities) <= 51
        assert [h.id for h in m.recall("Alice file")][:1] == [a]
        with pytest.raises(InvalidInput, match="entity"):  # what the caller passes is checked
            m.remember("user", "x", entities=["e" * 600])


# ---------------------------------------------------------------------- 3. readers and batches


def _append_batches(directory, batches, size):
    from datetime import datetime, timezone

    from eventlog.events import FactRemembered
    from eventlog.log import EventLog

    t = datetime(2026, 1, 1, tzinfo=timezone.utc)
    with EventLog(directory, fsync="never") as log:
        for _ in range(batches):
            log.append_many(
                [FactRemembered(tx_at=t, subject="s", text="x" * 100 + str(i)) for i in range(size)]
            )


def test_a_reader_never_sees_part_of_a_batch(tmp_path):
    """A writer process appends batches of 2,000 events in one write each; a reader polling
    beside it must only ever see whole batches (before the fix: ~15 of ~3,000 polls did not)."""
    import multiprocessing

    from eventlog.log import EventLog

    directory, size = tmp_path / "log", 2000
    EventLog(directory).close()
    writer = multiprocessing.get_context("spawn").Process(
        target=_append_batches, args=(directory, 60, size)
    )
    reader = EventLog(directory, read_only=True)
    writer.start()
    polls, partial = 0, []
    try:
        while writer.is_alive() or polls == 0:
            seq = reader.refresh()
            polls += 1
            if seq % size:
                partial.append(seq)
    finally:
        writer.join()
        reader.close()
    assert polls > 50 and partial == [], f"{len(partial)} of {polls} polls saw a partial batch"


# ---------------------------------------------------------------------- 5. m.sql


def test_sql_runs_now_outlives_writes_and_can_be_stopped(store):
    import signal
    import threading
    import time

    from hmem.errors import QueryTimeout

    with Memory(store, embedder=None) as m:
        for i in range(5):
            m.remember("a", f"fact {i}")
        with pytest.raises(InvalidInput, match="SQL failed"):  # at the call, not at fetch
            m.sql("SELECT 1 / 'x'")
        before = m.sql("SELECT count(*) FROM facts")
        m.remember("a", "six")
        assert before.fetchall() == [(5,)]  # a result is a snapshot, alive after a write
        result = m.sql("SELECT 1 AS one")
        with pytest.raises(Exception, match="facts"):
            result.query("x", "DELETE FROM facts")  # the result's own database has no facts
        assert m.sql("SELECT count(*) FROM facts").fetchall() == [(6,)]
        started = time.monotonic()
        with pytest.raises(QueryTimeout):
            m.sql("SELECT count(*) FROM range(1000000000000)", timeout=0.5)
        assert time.monotonic() - started < 10
        with pytest.raises(InvalidInput, match="more than 1,000 rows"):
            m.sql("SELECT * FROM range(5000)", max_rows=1000)
        seen: list[int] = []
        errors: list[BaseException] = []

        def reader() -> None:
            try:
                for _ in range(15):
                    seen.append(m.sql("SELECT count(*) FROM facts").fetchall()[0][0])
            except BaseException as e:  # noqa: BLE001 - reported below
                errors.append(e)

        threads = [threading.Thread(target=reader) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors and seen == [6] * 60

        def interrupt(*_: object) -> None:
            raise KeyboardInterrupt

        old = signal.signal(signal.SIGALRM, interrupt)
        try:
            signal.setitimer(signal.ITIMER_REAL, 0.3)
            started = time.monotonic()
            with pytest.raises(KeyboardInterrupt):
                m.sql("SELECT count(*) FROM range(1000000000000)")
            assert time.monotonic() - started < 10
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)
        assert m.sql("SELECT count(*) FROM facts").fetchall() == [(6,)]  # still serving
