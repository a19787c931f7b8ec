"""The notebook surface: events() and sql() are read-only and never cross namespaces."""

from __future__ import annotations

import tempfile
from datetime import datetime
from pathlib import Path

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hmem import Memory, errors
from tests.conftest import examples


@pytest.fixture
def mem(tmp_path):
    with Memory(tmp_path / "s", embedder=None) as m:
        a = m.remember("maya", "Maya lives in London", source_agent="chat")
        m.revise(a, "Maya lives in Paris", valid_from="2030-01-01", reason="moved")
        m.remember("tom", "Tom likes chess")
        m.in_namespace("secret").remember("maya", "Maya's password is hunter2")
        yield m


def test_sql_sees_only_this_namespace(mem):
    rows = mem.sql("SELECT id, text FROM facts ORDER BY id").fetchall()
    assert rows == [(1, "Maya lives in London"), (2, "Maya lives in Paris"), (3, "Tom likes chess")]
    for table in ("facts", "fact_versions", "events", "entities", "postings", "vectors"):
        other = mem.sql(f"SELECT count(*) FROM {table} WHERE namespace <> 'default'")
        assert other.fetchall() == [(0,)], table
    assert mem.sql("SELECT count(*) FROM postings WHERE term = 'hunter2'").fetchall() == [(0,)]
    secret = mem.in_namespace("secret")
    secret_facts = secret.sql("SELECT id, text FROM facts").fetchall()
    assert secret_facts == [(4, "Maya's password is hunter2")]


def test_sql_is_read_only_and_errors_are_typed(mem):
    for bad in ("DROP TABLE facts", "DELETE FROM facts", "INSERT INTO facts VALUES (1)",
                "ATTACH 'x.db'", "COPY facts TO 'out.csv'", ""):
        with pytest.raises(errors.InvalidInput):
            mem.sql(bad)
    with pytest.raises(errors.InvalidInput, match="SQL"):
        mem.sql("SELECT * FROM no_such_table")
    assert mem.sql("SELECT count(*) FROM facts").fetchall() == [(3,)]


def test_sql_takes_parameters_and_follows_new_writes(mem):
    assert mem.sql("SELECT text FROM facts WHERE id = ?", [3]).fetchall() == [("Tom likes chess",)]
    mem.remember("tom", "Tom plays go")
    assert mem.sql("SELECT count(*) FROM facts").fetchall() == [(4,)]


EVENT_COLUMNS = ["seq", "type", "tx_at", "namespace", "fact_id", "target_id", "subject",
                 "subject_key", "text", "source_agent", "source_ref", "reason"]
# Each event of the fixture, without its tx_at (the wall clock).
EVENTS = [
    {"seq": 1, "type": "remembered", "namespace": "default", "fact_id": 1, "target_id": None,
     "subject": "maya", "subject_key": "maya", "text": "Maya lives in London",
     "source_agent": "chat", "source_ref": None, "reason": None},
    {"seq": 2, "type": "revised", "namespace": "default", "fact_id": 2, "target_id": 1,
     "subject": "maya", "subject_key": "maya", "text": "Maya lives in Paris",
     "source_agent": "chat", "source_ref": None, "reason": "moved"},
    {"seq": 3, "type": "remembered", "namespace": "default", "fact_id": 3, "target_id": None,
     "subject": "tom", "subject_key": "tom", "text": "Tom likes chess",
     "source_agent": None, "source_ref": None, "reason": None},
]


def records(relation: duckdb.DuckDBPyRelation) -> list[dict]:
    """A relation's rows as dicts by column name, without tx_at (checked on its own)."""
    assert relation.columns == EVENT_COLUMNS
    rows = [dict(zip(relation.columns, row, strict=True)) for row in relation.fetchall()]
    for row in rows:
        assert isinstance(row.pop("tx_at"), datetime)
    return rows


def test_events_carry_each_events_fields_in_seq_order(mem):
    assert records(mem.events()) == EVENTS
    tx = [row[0] for row in mem.events().project("tx_at").fetchall()]
    assert tx == sorted(tx) and all(t.tzinfo is not None for t in tx)


def test_events_filter_by_time_type_and_subject(mem):
    assert [r[0] for r in mem.events(since=1).fetchall()] == [2, 3]
    assert [r[0] for r in mem.events(until=2).fetchall()] == [1, 2]
    assert [r[0] for r in mem.events(types=["revised"]).fetchall()] == [2]
    assert [r[0] for r in mem.events(subject="MAYA").fetchall()] == [1, 2]
    assert [r[0] for r in mem.events(since=1, until=2, subject="maya").fetchall()] == [2]
    assert [r[0] for r in mem.events(subject="nobody").fetchall()] == []
    assert records(mem.events(types="revised")) == [EVENTS[1]]
    assert records(mem.events(types=["remembered"], subject="tom")) == [EVENTS[2]]
    with pytest.raises(errors.InvalidInput, match="unknown event types"):
        mem.events(types=["deleted"])


def test_events_as_a_pandas_frame_hold_the_same_rows(mem):
    """``.df()`` (pandas is a dev dependency) gives what ``fetchall()`` gives."""
    pandas = pytest.importorskip("pandas")
    frame = mem.events(types="revised").df()
    assert isinstance(frame, pandas.DataFrame) and list(frame.columns) == EVENT_COLUMNS
    row = frame.drop(columns=["tx_at"]).astype(object).where(frame.notna(), None)
    assert row.to_dict("records") == [EVENTS[1]]
    assert list(mem.events().df()["seq"]) == [1, 2, 3]
    facts = mem.sql("SELECT id, text FROM facts ORDER BY id").df()
    assert facts.to_dict("list") == {
        "id": [1, 2, 3],
        "text": ["Maya lives in London", "Maya lives in Paris", "Tom likes chess"],
    }


def test_relations_survive_later_queries(mem):
    first = mem.sql("SELECT id FROM facts ORDER BY id")
    second = mem.events()
    third = mem.sql("SELECT count(*) FROM events")
    assert [r[0] for r in second.fetchall()] == [1, 2, 3]
    assert first.fetchall() == [(1,), (2,), (3,)]
    assert third.fetchall() == [(3,)]


# ------------------------------------------------------------------ the copy kept up to date

_ops = st.lists(
    st.tuples(st.sampled_from(["remember", "correct", "world", "forget", "embed", "recall",
                               "sql"]),
              st.sampled_from(["default", "other"]), st.integers(0, 50)),
    min_size=1, max_size=30,
)


def _dump(con: duckdb.DuckDBPyConnection) -> dict[str, list[tuple[object, ...]]]:
    from projections.sql_tables import TABLES

    return {t: con.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall() for t in TABLES}


@settings(max_examples=examples(dev=30, ci=200))
@given(ops=_ops)
def test_a_refreshed_copy_equals_a_fresh_one(ops):
    """m.sql refreshes its private copy with what changed since (new rows, and every row of a
    fact a later event touched); the result is the copy a fresh read would make."""
    from hmem.notebook.sql import NamespaceCopy

    with tempfile.TemporaryDirectory() as tmp, Memory(
        Path(tmp) / "s", embedder="hash", embed_mode="inline", log_recalls=True
    ) as m:
        heads: dict[str, list[int]] = {"default": [], "other": []}
        for kind, ns, pick in ops:
            mem = m.in_namespace(ns)
            live = heads[ns]
            if kind == "sql":
                m.sql("SELECT 1").fetchall()  # refreshes the default namespace's copy
                with m.reading() as store:
                    fresh = NamespaceCopy(store.projector, "default")
                assert _dump(m.copies["default"].con) == _dump(fresh.con)
                fresh.close()
            elif kind == "recall":
                mem.recall(f"fact {pick}")
            elif kind == "remember" or not live:
                live.append(mem.remember("maya", f"fact {pick} about tea", entities=["Tea"],
                                         dedup=False))  # each a fact the ops may change
            elif kind == "embed":
                mem.record_embedding(live[pick % len(live)], "other-model", [1.0, float(pick)])
            else:
                old = live.pop(pick % len(live))
                if kind == "forget":
                    mem.forget(old)
                else:
                    when = f"{2030 + m.last_seq}-01-01" if kind == "world" else None
                    live.append(mem.revise(old, f"fact {pick} revised", valid_from=when))
