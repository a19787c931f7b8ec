"""Fixtures of the store-level suites."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture
def url() -> Iterator[str]:
    """A new, empty store on this process's PostgreSQL server, dropped afterwards (a module
    that defines its own ``url`` uses that one)."""
    from tests.support.pg_support import drop_store, fresh_store_url  # skips without a server

    url = fresh_store_url()
    yield url
    drop_store(url)
