"""The recall benchmarks' metrics (bench.locomo): evidence recall at k, precision at 10, and
recall within each token budget of what the budgeted recall returned."""

from __future__ import annotations

from bench.locomo import BUDGETS, KS, Scores, score_budgets, score_hits, score_row


def test_recall_at_k_counts_evidence_among_the_top_k() -> None:
    scores = Scores()
    refs = [f"D1:{i}" for i in range(30)]
    score_hits(scores, frozenset({"D1:3", "D1:12", "D9:9"}), refs, [10] * 30)
    row = score_row(scores)
    assert [row[f"R@{k}"] for k in KS] == [1 / 3, 1 / 3, 2 / 3]
    assert row["tokens@10"] == 100
    assert row["P@10"] == 1 / 10  # one of the top ten hits is evidence


def test_precision_at_10_counts_the_hits_returned_and_none_returned_as_zero() -> None:
    scores = Scores()
    score_hits(scores, frozenset({"a", "x"}), ["a", "b"], [5, 5])  # 1 of the 2 returned
    score_hits(scores, frozenset({"a"}), [], [])  # nothing returned: 0, not left out
    assert scores.precision == [0.5, 0.0]
    assert score_row(scores)["P@10"] == 0.25


def test_recall_within_a_budget_is_that_of_what_the_budgeted_recall_returned() -> None:
    scores = Scores()
    asked: list[int] = []

    def ask(budget: int) -> list[str | None]:
        asked.append(budget)
        return ["a", "big", None] if budget >= 2000 else ["a", None]

    score_budgets(scores, frozenset({"big", "c"}), ask)
    assert asked == list(BUDGETS)
    row = score_row(scores)
    assert [row[f"R@10 in {b / 1000:g}k"] for b in BUDGETS] == [0, 0, 0.5, 0.5, 0.5]
    assert "R@10 in 1k" in row  # the name the README's table and bench.recall_defaults read
