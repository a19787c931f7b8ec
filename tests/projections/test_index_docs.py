"""Many facts' documents made at once (``index_runs``) equal each fact's ``index_counts``, and a
projector folding a bulk batch holds exactly the tokens (codes, runs, term table) it holds when
it folds the same events one at a time."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from hypothesis import given, settings
from hypothesis import strategies as st

from eventlog.events import FactRemembered, FactRevised
from projections.index_docs import index_counts, index_runs
from projections.projector import Projector
from tests.conftest import examples

# words that stem, stopwords, repeats, letters that change under casefold (ß, İ, Σ), digits,
# underscores and marks between words, and the upper-case word index_runs separates texts with
WORDS = ["maya", "Maya", "lives", "living", "in", "the", "Paris", "PARIS", "camping", "ß",
         "Straße", "İstanbul", "ΣΊΣΥΦΟΣ", "order", "#4471", "a_b", "x2", "HMEMDOCEND",
         "hmemdocend", "it's", "über", "naïve", "e\u0301t\u0301e", "日本語", "—", "", "  "]
texts = st.lists(st.sampled_from(WORDS), max_size=12).map(" ".join) | st.text(max_size=40)
subjects = st.sampled_from(["maya", "Maya Lee", "user", "the", "", "Paris", "order #4471",
                            "HMEMDOCEND", "ß"]) | st.text(max_size=12)


def documents(terms: list[str], runs, lengths) -> list[list[str]]:
    out, start = [], 0
    for n in lengths.tolist():
        out.append([terms[t] for t in runs[start:start + n].tolist()])
        start += n
    return out


def expanded(counts: dict[str, int]) -> list[str]:
    return [term for term, tf in counts.items() for _ in range(tf)]


@settings(max_examples=examples(dev=300, ci=3000))
@given(st.lists(st.tuples(subjects, texts), max_size=30))
def test_documents_made_together_equal_each_made_alone(facts):
    terms, runs, lengths = index_runs([s for s, _ in facts], [t for _, t in facts])
    want = [expanded(index_counts(s, t)) for s, t in facts]
    assert len(runs) == int(lengths.sum())
    assert documents(terms, runs, lengths) == want
    seen = list(dict.fromkeys(t for doc in want for t in doc))
    assert terms == seen  # distinct, in order of first appearance


def test_many_documents_over_a_few_words_stay_apart():
    """More documents than distinct words: a (document, word) pair is never taken for
    another's (each document's own counts, in its own order)."""
    facts = [("s", ["tea tea coffee", "coffee", "tea"][i % 3]) for i in range(60)]
    terms, runs, lengths = index_runs([s for s, _ in facts], [t for _, t in facts])
    assert documents(terms, runs, lengths) == [expanded(index_counts(s, t)) for s, t in facts]


UTC = timezone.utc
START = datetime(2026, 1, 1, tzinfo=UTC)


def events_of(facts: list[tuple[str, str]], revise_every: int) -> list:
    out: list = []
    for i, (subject, text) in enumerate(facts, start=1):
        stamp = {"seq": i, "tx_at": START + timedelta(seconds=i)}
        if revise_every and i % revise_every == 0 and out:
            out.append(FactRevised(namespace="default", fact_id=i - 1, text=text or "x",
                                   subject=subject.strip() or None, **stamp))
        else:
            out.append(FactRemembered(namespace="default", subject=subject.strip() or "s",
                                      text=text or "x", **stamp))
    return out


@settings(max_examples=examples(dev=60, ci=600))
@given(st.lists(st.tuples(subjects, texts), min_size=1, max_size=80), st.integers(0, 5))
def test_a_bulk_fold_holds_the_tokens_of_a_fold_one_event_at_a_time(facts, revise_every):
    events = events_of(facts, revise_every)
    one, bulk = Projector(), Projector()
    for ev in events:
        try:
            one.apply(ev)
        except Exception:  # a refused event ends the history for both
            events = events[: ev.seq - 1]
            break
    bulk.apply_all(events)
    a, b = one.space("default").state, bulk.space("default").state
    assert a.n == b.n == a.tokened == b.tokened
    assert a.terms.values == b.terms.values
    assert a.tokens.values[: a.tokens.n].tolist() == b.tokens.values[: b.tokens.n].tolist()
    assert a.table.doc_len[: a.n].tolist() == b.table.doc_len[: b.n].tolist()
    assert a.table.tokens_end[: a.n].tolist() == b.table.tokens_end[: b.n].tolist()
