"""Table-driven tests of the tokenizer, the entity rule and time parsing."""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta, timezone

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hmem.errors import InvalidTime
from hmem.time.iso import parse_time
from projections.entities import (
    capitalised_runs,
    extract_entities,
    fact_entities,
    normalize_entity,
)
from projections.projector import index_counts, index_text
from projections.text import WORD, TextIndex, term_counts, tokenize, words_of
from tests.conftest import examples

UTC = timezone.utc


@pytest.mark.parametrize(
    "text,tokens",
    [
        ("Maya lives in London", ["maya", "live", "london"]),
        ("Where does Maya live?", ["maya", "live"]),
        ("The cities are busy", ["citi", "busi"]),  # Snowball stems
        ("camping and hiking", ["camp", "hike"]),
        ("boxes, glasses and dishes", ["box", "glass", "dish"]),
        ("this is his bus", ["bus"]),  # stopwords dropped; "bus" keeps its s
        ("Café déjà-vu 2025", ["café", "déjà", "vu", "2025"]),
        ("snake_case word_split", ["snake", "case", "word", "split"]),
        ("", []),
    ],
)
def test_tokenize(text, tokens):
    assert tokenize(text) == tokens


def test_stopword_only_queries_can_keep_stopwords():
    assert tokenize("who are you") == []
    assert tokenize("who are you", keep_stopwords=True) == ["who", "are", "you"]


def test_term_counts_match_tokens():
    assert term_counts("tea, tea and more tea; coffee") == {"tea": 3, "coffe": 1}


def test_bm25_prefers_rare_terms_and_shorter_documents():
    index = TextIndex()
    index.add(tokenize("maya likes tea"))
    index.add(tokenize("maya likes coffee"))
    index.add(tokenize("maya likes coffee very much and many other things besides"))
    docs, scores = index.score(tokenize("coffee"))
    ranked = [int(d) for _, d in sorted(zip(scores, docs, strict=True), reverse=True)]
    assert ranked == [1, 2]
    docs, scores = index.score(tokenize("maya tea"))
    assert int(docs[scores.argmax()]) == 0


@pytest.mark.parametrize(
    "text,entities",
    [
        ("Maya lives in London", ["maya", "london"]),
        ("She moved to New York with Tom", ["new york", "tom"]),
        ("The meeting is on Monday", []),
        ("Yesterday I met Dr Chen at MIT", ["dr chen", "mit"]),
        ("Maya's sister", ["maya"]),
        ("no capitals here", []),
    ],
)
def test_proper_noun_rule(text, entities):
    assert extract_entities(text) == entities


# The rule's runs as first written: a word boundary, then a capital
_BOUNDARY_FIRST = re.compile(r"\b[A-Z][\w'’-]*(?:\s+[A-Z][\w'’-]*)*")


@settings(max_examples=examples(dev=300, ci=3000))
@given(st.text(max_size=60)
       | st.text(st.sampled_from("AaZz_9 -'’\n.éÉßİ\u00a0\u2028"), max_size=30))
def test_the_capitalised_runs_are_those_after_a_word_boundary(text):
    """The capital is matched first and the boundary checked behind it (the search then
    skips to capitals in C): the same runs as the boundary-first pattern, Unicode included."""
    assert capitalised_runs(text) == _BOUNDARY_FIRST.findall(text)


def test_fact_entities_prefers_the_callers_list():
    assert fact_entities("Maya", "Maya met Tom in Paris") == ("maya", "tom", "paris")
    assert fact_entities("Maya", "Maya met Tom", ["Acme  Corp"]) == ("maya", "acme corp")
    assert normalize_entity("  New   York ") == "new york"


@pytest.mark.parametrize(
    "value,expected",
    [
        ("2025-01-01", datetime(2025, 1, 1, tzinfo=UTC)),
        ("2025-01-01T09:30:00Z", datetime(2025, 1, 1, 9, 30, tzinfo=UTC)),
        ("2025-01-01T09:30:00+02:00", datetime(2025, 1, 1, 7, 30, tzinfo=UTC)),
        (date(2025, 1, 1), datetime(2025, 1, 1, tzinfo=UTC)),
        (datetime(2025, 1, 1, 1, tzinfo=timezone(timedelta(hours=1))),
         datetime(2025, 1, 1, tzinfo=UTC)),
    ],
)
def test_parse_time_accepts(value, expected):
    got = parse_time(value, "t")
    assert got == expected and got.tzinfo == UTC


@pytest.mark.parametrize(
    "value,message",
    [
        ("2025-01-01T09:30", "no time zone"),
        (datetime(2025, 1, 1), "no time zone"),
        ("last tuesday", "ISO 8601"),
        ("", "ISO 8601"),
        (20250101, "must be a datetime"),
        ("0001-01-01", "outside"),
    ],
)
def test_parse_time_rejects(value, message):
    with pytest.raises(InvalidTime, match=message):
        parse_time(value, "t")


@given(
    subject=st.text(alphabet="Maya Lon the is:é_-1", max_size=20),
    text=st.text(alphabet="Maya lives in London the is é_-1.", max_size=60),
)
def test_index_counts_equal_counts_of_index_text(subject, text):
    """The replay fast path (tokenize the text once, each subject once) indexes exactly what
    the documented rule says: the counts of ``index_text(subject, text)``."""
    assert index_counts(subject, text) == term_counts(index_text(subject, text))
    assert list(index_counts(subject, text)) == list(term_counts(index_text(subject, text)))


@given(
    docs=st.lists(st.lists(st.sampled_from("abcdefg"), max_size=12), min_size=1, max_size=40),
    term=st.sampled_from("abcdefgh"),
)
def test_term_scores_is_score_of_one_term_bit_for_bit(docs, term):
    """Recall scores the query's words one at a time from the postings alone; each must be
    exactly what a full pass of ``score`` gives."""
    index = TextIndex()
    for tokens in docs:
        index.add(tokens)
    got, want = index.term_scores(term), index.score([term])
    assert np.array_equal(got[0], want[0])
    assert got[1].dtype == want[1].dtype == np.float32
    assert got[1].tobytes() == want[1].tobytes()


@given(
    docs=st.lists(st.lists(st.sampled_from("abcdefg"), max_size=12), min_size=1, max_size=40),
    query=st.dictionaries(st.sampled_from("abcdefgh"),
                          st.sampled_from([1.0, 0.5, 0.0, -0.25, 0.3333]), max_size=6),
)
def test_a_query_scores_its_postings_bit_for_bit_as_a_pass_over_every_document(docs, query):
    """``score`` reads only the documents the query's postings name; each document's score is
    what adding every term's contribution to a zero per document gives, bit for bit, and the
    documents scoring 0 are left out."""
    index = TextIndex()
    for tokens in docs:
        index.add(tokens)
    got_docs, got_scores = index.score(query)
    every = np.zeros(len(docs), dtype=np.float32)
    index.accumulate(query, every)  # the pass over every document
    want_docs = np.flatnonzero(every)
    want_scores = every[want_docs]
    assert got_docs.tolist() == want_docs.tolist()
    assert got_scores.dtype == np.float32
    assert got_scores.tobytes() == want_scores.tobytes()


_WORDS = st.text(
    st.characters(categories=("Ll", "Lu", "Nd"), max_codepoint=0x24F) | st.sampled_from("'-"),
    min_size=1, max_size=24,
)


@given(st.lists(_WORDS, max_size=30))
def test_the_compiled_stemmer_stems_as_the_pure_python_one(words):
    """The stems are the index's tokens: with PyStemmer installed (a dependency: the same
    Snowball algorithms compiled), every word stems exactly as snowballstemmer's own Python
    does, so an index made by either answers the same queries."""
    from snowballstemmer.english_stemmer import EnglishStemmer

    from projections.text import STEMMER

    assert type(STEMMER).__module__ == "Stemmer"  # PyStemmer's, not the Python one again
    python = EnglishStemmer()
    tricky = ["generously", "cities", "dying", "skies", "news", "andes", "gently", "ugly",
              "succeeded", "proceed", "exceed", "inning", "outing", "canning", "herring",
              "earring", "idly", "bias", "atlas", "cosmos", "howe", "commun", "arsenal",
              "Ὀδυσσεύς", "naïve", "résumé", "ﬁnancial", "İstanbul"]
    for word in [w.casefold() for w in words + tricky]:
        assert STEMMER.stemWord(word) == python.stemWord(word), word


@settings(max_examples=examples(dev=300, ci=3000))
@given(st.text(max_size=60) | st.text(st.characters(max_codepoint=127), max_size=60)
       | st.text(st.sampled_from("aZ9_ -'\t\x1c\x1f\x0b\x7f.é’ß"), max_size=30))
def test_the_words_of_a_text_are_the_word_patterns_matches(text):
    """The ASCII fast path (translate and split) finds exactly what the pattern finds:
    underscores and ASCII separators that ``str.split`` treats as spaces included."""
    assert words_of(text) == WORD.findall(text)
    assert words_of(text.casefold()) == WORD.findall(text.casefold())
