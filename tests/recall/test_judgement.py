"""Ranking by what extraction judged (importance, category) and pinned procedural facts: off by
default (the same hits as before), each doing what RecallConfig says when set."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from eventlog.events import FactRemembered
from hmem import Memory
from hmem.adapters.demo import StepClock
from hmem.errors import InvalidInput
from hmem.recall.ranking import RecallConfig

START = datetime(2025, 1, 1, tzinfo=timezone.utc)


def memory(path, config: RecallConfig | None = None, **kw) -> Memory:
    return Memory(path, clock=StepClock(START, timedelta(minutes=1)), embedder=None,
                  recall_config=config, **kw)


def judged_facts(m: Memory) -> dict[str, int]:
    """Three facts that match "tea" alike, with the judgements extraction records."""
    with m.transaction() as t:
        pos = {
            "low": t.append(FactRemembered(subject="maya", text="Maya drinks tea at noon",
                                           importance=2, category="episodic")),
            "high": t.append(FactRemembered(subject="maya", text="Maya drinks tea at dawn",
                                            importance=9, category="semantic")),
            "rule": t.append(FactRemembered(subject="maya", text="Always serve Maya tea hot",
                                            importance=5, category="procedural")),
        }
    return {k: t.seq(p) for k, p in pos.items()}


def ids(m: Memory, query: str, **kw) -> list[int]:
    return [h.id for h in m.recall(query, **kw)]


def test_off_by_default(tmp_path):
    """By default judged facts rank exactly as the same facts without judgements."""
    with memory(tmp_path / "judged") as m:
        judged_facts(m)
        m.remember("sam", "Sam drinks coffee")
        judged = [ids(m, q) for q in ("maya drinks tea", "tea", "serve", "drinks")]
    with memory(tmp_path / "plain") as m:
        with m.transaction() as t:
            for text in ("Maya drinks tea at noon", "Maya drinks tea at dawn",
                         "Always serve Maya tea hot"):
                t.append(FactRemembered(subject="maya", text=text))
        m.remember("sam", "Sam drinks coffee")
        assert [ids(m, q) for q in ("maya drinks tea", "tea", "serve", "drinks")] == judged


def test_importance_and_category_weights(tmp_path):
    with memory(tmp_path / "s") as m:
        f = judged_facts(m)
    with memory(tmp_path / "s", RecallConfig(importance_weight=1.0)) as m:
        got = ids(m, "maya drinks tea")
        assert got.index(f["high"]) < got.index(f["low"])
    with memory(tmp_path / "s", RecallConfig(semantic_weight=0.1)) as m:
        got = ids(m, "maya drinks tea")
        assert got.index(f["low"]) < got.index(f["high"])


def test_procedural_facts_lead_every_recall_beyond_the_limit(tmp_path):
    with memory(tmp_path / "s") as m:
        f = judged_facts(m)
        m.remember("sam", "Sam plays chess")
    with memory(tmp_path / "s", RecallConfig(pin_procedural=3)) as m:
        assert ids(m, "chess", limit=1) == [f["rule"], f["rule"] + 1]  # pinned, then the hit
        assert ids(m, "nothing matches this") == [f["rule"]]
        assert ids(m, "serve tea hot") [0] == f["rule"]  # once, though it matches too
        assert ids(m, "serve tea hot").count(f["rule"]) == 1
        explained = m.recall("chess", explain=True).hits[0]
        assert explained.explain == {"pinned": 1.0}
        assert ids(m, "chess", max_tokens=1) == []  # the budget binds pinned facts too
        before = m.last_seq
        m.forget(f["rule"])
        assert ids(m, "chess") == [f["rule"] + 1]
        assert [h.id for h in m.recall("chess", as_of=before)][0] == f["rule"]


def test_bad_weights_are_refused():
    for bad in ({"importance_weight": 1.5}, {"importance_weight": -0.1},
                {"episodic_weight": -1}, {"pin_procedural": -1}, {"pin_procedural": 1.5}):
        with pytest.raises(InvalidInput):
            RecallConfig(**bad)


def test_a_pinned_fact_still_lends_its_match_to_its_neighbour_turn(tmp_path):
    """Found by review: a turn that borrows its match from a pinned fact is shown as it is
    without pinning (its lender is shown, pinned)."""
    with memory(tmp_path / "s") as m:
        with m.transaction() as t:
            t.append(FactRemembered(subject="maya", text="Always serve Maya tea hot",
                                    category="procedural", source_ref="s1:1"))
            t.append(FactRemembered(subject="sam", text="Noted, I will remember",
                                    source_ref="s1:2"))
        plain = ids(m, "serve tea hot")
    with memory(tmp_path / "s", RecallConfig(pin_procedural=1)) as m:
        assert ids(m, "serve tea hot") == plain == [1, 2]
