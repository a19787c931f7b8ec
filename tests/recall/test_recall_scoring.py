"""The recall benchmarks' metric (bench.locomo.score_hits): evidence recall at k, and at 10 hits
within the 1,000-token budget, as ``recall(limit=10, max_tokens=1000)`` would keep them."""

from __future__ import annotations

from bench.locomo import KS, Scores, score_hits, score_row


def test_recall_at_k_counts_evidence_among_the_top_k() -> None:
    scores = Scores()
    refs = [f"D1:{i}" for i in range(30)]
    score_hits(scores, frozenset({"D1:3", "D1:12", "D9:9"}), refs, [10] * 30)
    row = score_row(scores)
    assert [row[f"R@{k}"] for k in KS] == [1 / 3, 1 / 3, 2 / 3]
    assert row["tokens@10"] == 100
    assert row["R@10 in 1k"] == 1 / 3  # ten hits of 10 tokens all fit


def test_the_budget_skips_hits_that_do_not_fit_and_takes_later_ones_that_do() -> None:
    scores = Scores()
    refs = ["a", "big", "b", "c"]
    score_hits(scores, frozenset({"big", "c"}), refs, [400, 700, 500, 90])
    # "a" (400) fits, "big" (700) would make 1,100: skipped; "b" makes 900; "c" makes 990
    assert score_row(scores)["R@10 in 1k"] == 0.5
    assert score_row(scores)["R@10"] == 1.0
