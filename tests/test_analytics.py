"""The notebook surface: events() and sql() are read-only and never cross namespaces."""

from __future__ import annotations

import pytest

from hmem import Memory, errors


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
    assert [r[1] for r in rows] == ["Maya lives in London", "Maya lives in Paris", "Tom likes chess"]
    for table in ("facts", "fact_versions", "events", "entities", "postings", "vectors"):
        assert mem.sql(f"SELECT count(*) FROM {table} WHERE namespace <> 'default'").fetchall() == [(0,)]
    assert mem.sql("SELECT count(*) FROM postings WHERE term = 'hunter2'").fetchall() == [(0,)]
    secret = mem.in_namespace("secret")
    assert secret.sql("SELECT count(*) FROM facts").fetchall() == [(1,)]


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


def test_events_filter_by_time_type_and_subject(mem):
    all_events = mem.events().fetchall()
    assert [r[1] for r in all_events] == ["remembered", "revised", "remembered"]
    assert [r[0] for r in mem.events(since=1).fetchall()] == [2, 3]
    assert [r[0] for r in mem.events(until=2).fetchall()] == [1, 2]
    assert [r[0] for r in mem.events(types=["revised"]).fetchall()] == [2]
    assert [r[0] for r in mem.events(subject="MAYA").fetchall()] == [1, 2]
    revised = mem.events(types="revised").df() if _has_pandas() else None
    assert revised is None or list(revised["reason"]) == ["moved"]
    with pytest.raises(errors.InvalidInput, match="unknown event types"):
        mem.events(types=["deleted"])


def test_relations_survive_later_queries(mem):
    first = mem.sql("SELECT id FROM facts ORDER BY id")
    second = mem.events()
    assert second.fetchall() and first.fetchall() == [(1,), (2,), (3,)]


def _has_pandas() -> bool:
    try:
        import pandas  # noqa: F401
    except ImportError:
        return False
    return True
