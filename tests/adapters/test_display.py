"""Every answer type reads as text: ``print(m.why(3))`` in a script and the bare value in a
notebook show what the CLI prints, not a dump of fields."""

from __future__ import annotations

import pytest

from hmem import Memory
from hmem.adapters import cli_format as fmt

pretty = pytest.importorskip("IPython.lib.pretty").pretty


def test_answers_print_and_display_as_the_cli_shows_them(tmp_path):
    with Memory(tmp_path / "s", embedder=None, log_recalls=True) as m:
        a = m.remember("maya", "Maya lives in London", valid_from="2025-01-01", source_ref="s1:t3")
        b = m.revise(a, "Maya lives in Paris", valid_from="2026-03-01T14:05:00Z")
        result = m.recall("where does maya live", source_ref="s1:t4")
        seq = m.last_seq
        shown = {
            "why": (m.why(b), fmt.why_lines(m.why(b))),
            "diff": (m.diff(0), fmt.diff_lines(m.diff(0))),
            "fact": (m.get(b), fmt.fact_lines(m.get(b))),
            "belief": (m.beliefs()[0], fmt.belief_lines(m.beliefs()[:1])),
            "stats": (m.stats(), fmt.stats_lines(m.stats())),
            "recall": (result, fmt.recall_lines(result)),
            "replay": (m.replay_recall(seq), fmt.replay_lines(m.replay_recall(seq))),
        }
        for name, (value, lines) in shown.items():
            assert str(value) == "\n".join(lines), name
            assert pretty(value) == str(value), name  # IPython / Jupyter's text display
        assert "valid 2025-01-01 to 2026-03-01T14:05Z" in str(m.why(b))
        assert str(m.recalls()[0]) == fmt.recalls_lines(m.recalls())[0]
        assert str(m.recalls()[0]).startswith(f"seq {seq}  ")
        assert pretty(m.recalls()[0]) == str(m.recalls()[0])
        assert str(result).startswith("- Maya lives in Paris (since 2026-03-01; replaced")


def test_an_erasure_receipt_says_what_each_count_counts(tmp_path):
    with Memory(tmp_path / "s", embedder=None) as m:
        a = m.remember("maya", "Maya lives in London")
        m.remember("maya", "Maya likes tea")
        m.revise(a, "Maya lives in Paris")
        receipt = m.erase(subject="maya")
    assert receipt.facts == 2 and receipt.versions == len(receipt.fact_ids) == 3
    counts = receipt.lines()[1]
    assert counts.startswith("  2 fact(s) (revision chains) in 3 fact version(s) #1, #2, #3;")
    assert str(receipt) == "\n".join(receipt.lines())
    assert pretty(receipt) == str(receipt)  # a notebook shows the text, not the fields


def test_why_after_an_erasure_names_each_version_erased_and_superseded_not_forgotten(tmp_path):
    with Memory(tmp_path / "s", embedder=None) as m:
        a = m.remember("maya", "Maya lives in London", valid_from="2025-01-01")
        b = m.revise(a, "Maya lives in Paris", valid_from="2026-03-01")
        c = m.revise(b, "Maya lives in Rome")
        receipt = m.erase(fact=c).seq
        chain = str(m.why(c)).splitlines()
    first, second, head = (next(line for line in chain if line.startswith(f"  #{i} "))
                           for i in (a, b, c))
    assert first.startswith(f"  #{a} [erased]  [superseded by #{b}; erased ")
    assert second.startswith(f"  #{b} [erased]  [superseded by #{c}; erased ")
    assert head.startswith(f"  #{c} [erased]  [erased ") and f"(receipt {receipt})]" in head
    assert not any("forgotten" in line or " : " in line for line in chain), chain
