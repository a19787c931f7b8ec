"""Projections: DuckDB tables and in-memory indexes derived from the event log."""
