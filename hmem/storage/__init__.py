"""The store: the event log and the state derived from it, on local files or on PostgreSQL.

``store.py`` holds :class:`~hmem.storage.store.Store` (the log, its projection and the write
path); the backend a store is on, its checkpoint, its erasure steps and key file, ``hmem copy``,
transactions and request ids each have a module of their own (docs/internals.md maps them).
"""
