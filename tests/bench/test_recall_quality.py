"""bench.recall_quality: one command runs both sets on the same stores, asks LoCoMo at once as
well, measures recall while the embedder is busy, and fails when any part fails."""

from __future__ import annotations

from typing import Any

import pytest

from bench import beam_recall, locomo, recall_busy, recall_quality


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    seen: dict[str, Any] = {"rc": {"locomo": 0, "beam": 0, "busy": 0}}
    for name, module in (("locomo", locomo), ("beam", beam_recall), ("busy", recall_busy)):
        def fake(argv: list[str], name: str = name) -> int:
            seen[name] = argv
            return int(seen["rc"][name])
        monkeypatch.setattr(module, "main", fake)
    return seen


def test_both_sets_run_on_the_same_stores_and_configs_with_the_at_once_figure(tmp_path, calls):
    assert recall_quality.main(["--stores", str(tmp_path), "--configs", "bm25,hybrid"]) == 0
    assert calls["locomo"] == ["--stores", str(tmp_path), "--configs", "bm25,hybrid",
                               "--at-once", "-q"]
    assert calls["beam"] == ["--stores", str(tmp_path), "--configs", "bm25,hybrid"]
    assert calls["busy"] == []


def test_without_stores_both_sets_share_one_temporary_directory_and_busy_can_be_skipped(calls):
    assert recall_quality.main(["--no-busy"]) == 0
    assert calls["locomo"][1] == calls["beam"][1]
    assert calls["beam"][3] == "plain,bm25,hybrid"
    assert "busy" not in calls


@pytest.mark.parametrize("part", ["locomo", "beam", "busy"])
def test_a_failing_part_fails_the_run(tmp_path, calls, part):
    calls["rc"][part] = 1
    assert recall_quality.main(["--stores", str(tmp_path)]) == 1
