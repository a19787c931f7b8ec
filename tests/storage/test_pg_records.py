"""What is not a fact, as tables on the server: episodes, logged recalls and their hits, and
vectors (projections/server_records.py). Their rows are the state's, written in the append's
transaction (a refused append leaves none), checked by ``verify`` (a tampered row in any of
them is found), walled by namespace, and made and filled once for a store made before them."""

from __future__ import annotations

from typing import Any

import pytest

from eventlog.events import EpisodeRecorded
from hmem import Memory, errors
from projections import server_records
from projections.server_records import RECORD_TABLES, embedded_records
from projections.server_tables import TABLES_VERSION, grant_namespace
from tests.support.backends import second_clock
from tests.support.pg_support import READER_ROLES, as_role, fresh_store_url, psycopg


@pytest.fixture
def url() -> str:
    return fresh_store_url()


def fill(m: Memory, namespace: str, word: str) -> None:
    """Two turns, a fact with its vector, a logged recall that returns it, in ``namespace``."""
    mine = m.in_namespace(namespace)
    with mine.transaction() as txn:
        txn.append(EpisodeRecorded(session_id="s1", turn=0, role="user", speaker="maya",
                                   text=f"I moved to {word}\x00 last week"))
        txn.append(EpisodeRecorded(session_id="s1", turn=1, role="assistant", text="noted"))
    fid = mine.remember("maya", f"Maya lives in {word}")
    mine.record_embedding(fid, "other-model", [0.1, -2.5e-8, 3.0])
    assert fid in [h.id for h in mine.recall(f"maya {word}", source_ref="turn-1").hits]


def counts(url: str) -> dict[str, int]:
    with psycopg.connect(url) as con:
        return {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                for t in ("hmem_log", "hmem_facts", *RECORD_TABLES)}


def test_episodes_recalls_hits_and_vectors_are_the_states_rows(url: str) -> None:
    with Memory(url, embedder="hash-8", embed_mode="inline", log_recalls=True,
                clock=second_clock()) as m:
        fill(m, "default", "Paris")
        fill(m, "hr", "Rome")
        assert m.verify().ok
        with psycopg.connect(url) as con:
            got = server_records.server_records(con)
            assert server_records.differences(con, m.store.projector) == {}
            vector = con.execute("SELECT vector FROM hmem_vectors WHERE model = 'other-model' "
                                 "ORDER BY seq LIMIT 1").fetchone()[0]
            turn = con.execute("SELECT text FROM hmem_episodes ORDER BY seq LIMIT 1").fetchone()
    assert {t: len(r) for t, r in got.items()} == {
        "hmem_episodes": 4, "hmem_recalls": 2, "hmem_recall_hits": 2, "hmem_vectors": 4}
    import numpy as np
    assert np.array(vector, dtype="<f4").tobytes() == np.array(
        [0.1, -2.5e-8, 3.0], dtype="<f4").tobytes()  # float32 exactly, read back as floats
    assert turn == ("I moved to Paris\ufffd last week",)  # as hmem_facts shows a NUL


@pytest.mark.parametrize("where", ["records", "facts"])
def test_an_append_refused_leaves_no_record_rows(
    url: str, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """The rows of the records go in the append's transaction: when the server refuses any
    part of it (the records' own statements, or the facts' after them), nothing is left."""
    import projections.server_tables as tables

    with Memory(url, embedder="hash-8", embed_mode="inline", log_recalls=True) as m:
        fill(m, "default", "Paris")
        before = counts(url)
        module, name = (server_records, "write_records") if where == "records" else (
            tables, "write_facts")
        real = getattr(module, name)

        def refuse(con: Any, *args: Any, **kwargs: Any) -> Any:
            done = real(con, *args, **kwargs)
            con.execute("SELECT 1/0")
            return done

        monkeypatch.setattr(module, name, refuse)
        for write in (lambda: fill(m, "default", "Rome"),
                      lambda: m.remember("tom", "Tom likes tea")):
            with pytest.raises(errors.LogWriteFailed, match="refused the append"):
                write()
            assert counts(url) == before
        monkeypatch.setattr(module, name, real)
        fill(m, "default", "Oslo")
        assert m.verify().ok


TAMPER = {
    "hmem_episodes": "UPDATE hmem_episodes SET text = 'I never said that' WHERE turn = 0",
    "hmem_recalls": "UPDATE hmem_recalls SET query = 'something else'",
    "hmem_recall_hits": "UPDATE hmem_recall_hits SET score = score + 1",
    "hmem_vectors": "UPDATE hmem_vectors SET vector[1] = vector[1] + 1 "
                    "WHERE model = 'other-model'",
}


@pytest.mark.parametrize("table", list(RECORD_TABLES))
def test_verify_finds_a_tampered_row_in_every_record_table(url: str, table: str) -> None:
    with Memory(url, embedder="hash-8", embed_mode="inline", log_recalls=True) as m:
        fill(m, "default", "Paris")
        assert m.verify().ok
        with psycopg.connect(url, autocommit=True) as con:
            con.execute(TAMPER[table])
        report = m.verify()
        assert not report.ok and report.tables == {table: (1, 1)}
        with psycopg.connect(url, autocommit=True) as con:
            held = con.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
            con.execute(f"DELETE FROM {table}")
        assert m.verify().tables == {table: (held, 0)}  # rows removed are missed too


def test_a_role_bound_to_one_namespace_reads_only_its_records(url: str) -> None:
    with Memory(url, embedder="hash-8", embed_mode="inline", log_recalls=True) as m:
        fill(m, "default", "Paris")
        fill(m, "o'ther%_", "Rome")
        want = {ns: {t: {r[0] for r in rows if r[1] == ns}
                     for t, rows in embedded_records(m.store.projector).items()}
                for ns in ("default", "o'ther%_")}
    role = READER_ROLES[1]
    with psycopg.connect(url, autocommit=True) as owner:
        grant_namespace(owner, role, "o'ther%_")
    with as_role(url, role) as con:
        for table in RECORD_TABLES:
            first = RECORD_TABLES[table][0]
            for query in (f"SELECT {first} FROM {table}",
                          f"SELECT {first} FROM {table} WHERE namespace <> 'x' OR true"):
                assert {r[0] for r in con.execute(query)} == want["o'ther%_"][table], query
            assert want["default"][table] and not want["default"][table] & {
                r[0] for r in con.execute(f"SELECT {first} FROM {table}")
            } - want["o'ther%_"][table]
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                con.execute(f"DELETE FROM {table}")


def _as_made_before_the_record_tables(url: str) -> None:
    """The store as a version of hmem without the record tables left it."""
    with psycopg.connect(url, autocommit=True) as con:
        for table in RECORD_TABLES:
            con.execute(f"DROP TABLE {table}")
        con.execute("DELETE FROM hmem_meta WHERE key = 'records_seq'")
        con.execute("UPDATE hmem_meta SET value = '1' WHERE key = 'tables_version'")


def test_a_store_made_before_the_record_tables_gets_them_once(url: str) -> None:
    with Memory(url, embedder="hash-8", embed_mode="inline", log_recalls=True) as m:
        fill(m, "default", "Paris")
        fill(m, "hr", "Rome")
    with psycopg.connect(url, autocommit=True) as owner:
        grant_namespace(owner, READER_ROLES[0], "hr")  # bound before the upgrade
    _as_made_before_the_record_tables(url)
    with Memory(url, embedder=None, read_only=True) as r:  # a reader makes nothing ...
        missing = r.verify().tables
        assert missing == {"hmem_episodes": (4, 0), "hmem_recalls": (2, 0),
                           "hmem_recall_hits": (2, 0), "hmem_vectors": (4, 0)}
    with Memory(url, embedder=None) as m:  # ... the first writer makes and fills them
        assert any("made and filled from the log" in n for n in m.notes), m.notes
        assert m.verify().ok
        last = m.last_seq
    with psycopg.connect(url) as con:
        meta = dict(con.execute("SELECT key, value FROM hmem_meta").fetchall())
    assert (meta["records_seq"], meta["tables_version"]) == (str(last), TABLES_VERSION)
    with as_role(url, READER_ROLES[0]) as con:
        assert {r[0] for r in con.execute("SELECT namespace FROM hmem_episodes")} == {"hr"}
    with Memory(url, embedder=None) as m:  # once
        assert m.notes == []


def test_record_tables_behind_the_log_are_written_again(url: str) -> None:
    """A writer that did not keep them (an older version beside this one) leaves
    ``records_seq`` behind: the next append writes every row again."""
    with Memory(url, embedder="hash-8", embed_mode="inline", log_recalls=True) as m:
        fill(m, "default", "Paris")
        with psycopg.connect(url, autocommit=True) as con:
            con.execute("DELETE FROM hmem_episodes")
            con.execute("UPDATE hmem_meta SET value = '2' WHERE key = 'records_seq'")
        assert set(m.verify().tables) == {"hmem_episodes"}
        m.remember("tom", "Tom likes tea")
        assert m.verify().ok
