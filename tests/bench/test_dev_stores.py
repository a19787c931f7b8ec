"""bench.dev_stores: a development set's store is built once and reopened read-only after."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from bench import dev_stores
from hmem import Memory

WHEN = datetime(2024, 5, 1, tzinfo=timezone.utc)


def test_a_store_is_built_once_then_reopened_and_an_unfinished_build_is_refused(tmp_path):
    built = []

    def ingest(m: Memory) -> dict[str, str]:
        built.append(m.in_namespace("a").remember("maya", "lives in Leeds"))
        return {"a": WHEN.isoformat()}

    m, refs = dev_stores.dev_store(tmp_path, "locomo", None, ingest)
    m.close()
    assert refs == {"a": WHEN} and len(built) == 1
    m, refs = dev_stores.dev_store(tmp_path, "locomo", None, ingest)
    with m:
        assert len(built) == 1 and refs == {"a": WHEN}  # reused, not built again
        assert [h.text for h in m.in_namespace("a").recall("maya")] == ["lives in Leeds"]
    (tmp_path / "beam-none").mkdir()  # a build that stopped before it finished
    with pytest.raises(SystemExit, match="unfinished build"):
        dev_stores.dev_store(tmp_path, "beam", None, ingest)
