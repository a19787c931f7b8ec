"""The PostgreSQL log's tables (eventlog/pg_log.py): ``hmem_log``, whose rows no statement can
change or delete (its triggers refuse UPDATE, DELETE and TRUNCATE), and ``hmem_writer``, the one
row whose lock every writer holds for its append; and the statements that take the locks."""

from __future__ import annotations

__all__ = ["CREATE_LOCK", "SCHEMA", "WRITER_LOCK"]

# the advisory lock key of the schema's creation only (any role can take an advisory lock, so
# writers lock a row of hmem_writer instead: only roles that may update it can)
CREATE_LOCK = 0x686D656D

SCHEMA = """
CREATE TABLE IF NOT EXISTS hmem_log (
    seq bigint PRIMARY KEY CHECK (seq > 0),
    payload bytea NOT NULL,
    chain bytea NOT NULL CHECK (length(chain) = 16),
    tx_us bigint NOT NULL
);
CREATE OR REPLACE FUNCTION hmem_log_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'hmem_log is append-only: % refused', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END $$;
DROP TRIGGER IF EXISTS hmem_log_no_change ON hmem_log;
CREATE TRIGGER hmem_log_no_change BEFORE UPDATE OR DELETE ON hmem_log
    FOR EACH ROW EXECUTE FUNCTION hmem_log_refuse();
DROP TRIGGER IF EXISTS hmem_log_no_truncate ON hmem_log;
CREATE TRIGGER hmem_log_no_truncate BEFORE TRUNCATE ON hmem_log
    FOR EACH STATEMENT EXECUTE FUNCTION hmem_log_refuse();
REVOKE ALL ON hmem_log FROM PUBLIC;
CREATE TABLE IF NOT EXISTS hmem_writer (one boolean PRIMARY KEY DEFAULT true CHECK (one));
INSERT INTO hmem_writer VALUES (true) ON CONFLICT DO NOTHING;
REVOKE ALL ON hmem_writer FROM PUBLIC;
"""
# the writers' lock: a row lock, which needs UPDATE on hmem_writer (a role bound to namespaces
# has none, so it cannot stop the writers); held for a transaction
WRITER_LOCK = "SELECT one FROM hmem_writer FOR UPDATE"
