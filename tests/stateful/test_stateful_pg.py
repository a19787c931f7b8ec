"""The crown jewel on the PostgreSQL backend: the stateful machine of
tests/stateful/test_stateful.py, every rule and every check against the model, run on a store
whose log and tables live on a server. After every step it also holds the server's own tables
(``hmem_facts``, ``hmem_fact_versions``, and the episodes, recalls and vectors of
projections/server_records.py, written in each append's transaction) to the embedded
projection, row for row, and the namespace wall of row-level security: a role bound to one
namespace reads exactly that namespace's rows, whatever SQL it sends, and none of the log.

The erase rule runs here as on a directory (a server store seals its texts with a key file
kept off the database): after an erasure the server's tables hold the state folded again, row
for row, so no table keeps what was erased.
"""

from __future__ import annotations

import pytest
from hypothesis import Phase, settings
from hypothesis.stateful import invariant

from projections import server_records
from projections.server_tables import embedded_rows, grant_namespace, server_rows
from tests.conftest import examples
from tests.stateful.stateful_support import NAMESPACES
from tests.stateful.test_stateful import MemoryMachine
from tests.support.pg_support import (
    READER_ROLES,
    as_role,
    drop_store,
    fresh_store_url,
    psycopg,
)


class PgMemoryMachine(MemoryMachine):
    def __init__(self) -> None:
        super().__init__()
        import shutil

        shutil.rmtree(self.dir, ignore_errors=True)
        self.dir = fresh_store_url()
        self.granted = False

    def teardown(self) -> None:
        if self.mem is not None:
            self.mem.close()
        drop_store(self.dir)

    @invariant()
    def store_matches_model(self):
        super().store_matches_model()
        if self.mem is None:
            return
        self.server_tables_match_projection()
        self.namespace_wall_holds_in_raw_sql()

    def server_tables_match_projection(self):
        projector = self.mem.store.projector
        want = embedded_rows(projector)
        with psycopg.connect(self.dir) as con:
            got = server_rows(con)
            records = server_records.differences(con, projector)
        assert records == {}, "the server's record tables differ from the projection's"
        assert got[0] == want[0], "hmem_facts differs from the projection's facts"
        assert got[1] == want[1], "hmem_fact_versions differs from the projection's versions"

    def namespace_wall_holds_in_raw_sql(self):
        if not self.granted:
            with psycopg.connect(self.dir, autocommit=True) as con:
                for role, ns in zip(READER_ROLES, NAMESPACES, strict=True):
                    grant_namespace(con, role, ns)
            self.granted = True
        for role, ns in zip(READER_ROLES, NAMESPACES, strict=True):
            mine = sorted(self.model.facts_in(ns))
            with as_role(self.dir, role) as con:
                assert [r[0] for r in con.execute("SELECT id FROM hmem_facts ORDER BY id")] == mine
                assert {r[0] for r in con.execute(
                    "SELECT DISTINCT fact_id FROM hmem_fact_versions")} == set(mine)
                for table in ("hmem_log", "hmem_namespace_roles", "hmem_meta"):
                    with pytest.raises(psycopg.errors.InsufficientPrivilege):
                        con.execute(f"SELECT * FROM {table}")


PgMemoryMachine.TestCase.settings = settings(
    MemoryMachine.TestCase.settings, max_examples=examples(dev=8, ci=30),
    phases=[p for p in settings.default.phases if p is not Phase.explain],
)
TestPgMemoryMachine = PgMemoryMachine.TestCase
