"""The subjects a query names, and what recall does with them.

A question about a speaker names them ("what did Melanie paint?"). In a conversation every
turn is led by its speaker's name (:func:`projections.index_docs.index_text`) and the other
speaker calls them by it ("Wow, Melanie!"), so the name says little about which turn answers:

- BM25 keeps the name as a query word (it weighs it by its idf, like any other word);
- the query's vector is made without it (``RecallConfig.embed_subject_names`` False): a
  sentence embedder's vector of a short question that names a person leans toward every turn
  that names them, and the topic of the question gets lost;
- a fact whose subject the query names scores ``1 + subject_boost * share`` times its relevance
  (``share``: the part of the named subjects that is the fact's own, so a question about two
  speakers favours neither).

A name is a run of one to three words of the query that equals a subject of the namespace,
compared as subjects are (:func:`projections.records.subject_key`; a possessive "'s" is
dropped). Stopwords never count as names. A subject counts once any fact of the namespace had
it, as the recall index keeps subjects: at an ``as_of`` before its first fact, or after its
facts were forgotten, its name is still left out of the vector and still counts in the share
(the boost itself touches only the facts the query can see). Names are matched in any case, so
a subject "May" is also the month: set ``embed_subject_names`` for a namespace of such names.

The first person names the asker. An agent asks its memory on behalf of the person it serves,
who says "I": "what did I say about my resume?". The words I, me, my and myself (and "I'm",
"I've", ...: :data:`FIRST_PERSON`) name the subject ``RecallConfig.asker_subject`` ("user", the
role chat APIs give that person) when the namespace has it, and its facts are favoured as a
named subject's are. They are stopwords, so the query's vector and BM25 are as before. Left
as they are, since the effect is a bounded boost: a Roman numeral ("World War I") counts, and
so does a possessive about another ("my sister's birthday" favours the user's facts beside the
sister's, as a query naming both would). "mine" does not count ("a gold mine"), nor does "you"
name the assistant: in "can you list ..." it is politeness, and counted so it cost BEAM-500K
1.3 points of R@10 (docs/benchmarks.md).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

import numpy as np

from projections.entities import normalize_entity
from projections.recall_index import NamespaceIndex
from projections.records import subject_key
from projections.text import STOPWORDS, tokenize

__all__ = ["FIRST_PERSON", "QUERY_WORD", "NamedSubjects", "named_subjects", "query_as_embedded"]

QUERY_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)?")  # a word of a query, "'s" kept on it
# The words that name the asker: I (so "I'm", "I've"), me, my, myself, in any case; not as part
# of "i.e.", "I/O", "my_var", "ME/CFS" or "my-app" (joined to the next by "_", "/", "-", or by
# "." before a letter, they are an abbreviation or a name)
FIRST_PERSON = re.compile(r"(?<![\w/.\-])(?:i|me|my|myself)(?![\w/\-]|\.\w)", re.IGNORECASE)
_LONGEST = 3  # words in the longest name looked up


class NamedSubjects:
    """The subject keys a query names, and where in the query it names them."""

    def __init__(self, query: str, keys: tuple[str, ...],
                 spans: tuple[tuple[int, int, str], ...]):
        self.query = query
        self.keys = keys
        self.spans = spans  # (start, end, key) of each name in the query

    def without(self, only: str | None = None) -> str:
        """The query with the names left out, or only the name of subject key ``only`` (a
        recall filtered to one subject: another subject's name there is content, not a
        speaker). The query itself when no word but stopwords would be left ("and what about
        Maya?"; "tell me about Maya" leaves "tell me about")."""
        spans = [(a, b) for a, b, key in self.spans if only is None or key == only]
        if not spans:
            return self.query
        parts, at = [], 0
        for start, end in spans:
            parts.append(self.query[at:start])
            at = end
        parts.append(self.query[at:])
        rest = " ".join("".join(parts).split())
        return rest if tokenize(rest) else self.query

    def factor(self, index: NamespaceIndex, docs: np.ndarray, boost: float) -> np.ndarray:
        """``1 + boost * share`` for each of ``docs`` (the module doc)."""
        if boost <= 0:
            return np.ones(len(docs))
        masks = [m for key in self.keys if (m := index.subject_mask(docs, key)) is not None]
        if not masks:
            return np.ones(len(docs))
        factor: np.ndarray = 1.0 + boost * np.sum(masks, axis=0) / len(self.keys)
        return factor


def named_subjects(index: NamespaceIndex | None, query: str, asker: str = "") -> NamedSubjects:
    """The subjects of the namespace (its recall ``index``) that ``query`` names: by name, or
    subject ``asker`` by the first person ("" : the first person names no one)."""
    if index is None:
        return NamedSubjects(query, (), ())
    named = _named(query, index.has_subject)
    key = subject_key(asker) if asker else ""
    if key and key not in named.keys and index.has_subject(key) and _first_person(query):
        # no span: the words are stopwords, and the query is embedded as it was
        return NamedSubjects(query, (*named.keys, key), named.spans)
    return named


def _first_person(query: str) -> bool:
    return FIRST_PERSON.search(query) is not None


def query_as_embedded(query: str, subjects: Iterable[str]) -> str:
    """The text recall embeds for ``query`` in a namespace of these ``subjects`` (with
    ``embed_subject_names`` False and no subject filter): for a benchmark that embeds its
    queries ahead."""
    keys = {subject_key(s) for s in subjects}
    return _named(query, keys.__contains__).without()


def _named(query: str, is_subject: Callable[[str], bool]) -> NamedSubjects:
    words = [(normalize_entity(m.group()), m.start(), m.end())
             for m in QUERY_WORD.finditer(query)]
    keys: dict[str, None] = {}
    spans: list[tuple[int, int, str]] = []
    i = 0
    while i < len(words):
        for n in range(min(_LONGEST, len(words) - i), 0, -1):  # the longest name first
            key = " ".join(w for w, _, _ in words[i : i + n])
            if key not in STOPWORDS and is_subject(key):
                keys[key] = None
                spans.append((words[i][1], words[i + n - 1][2], key))
                i += n
                break
        else:
            i += 1
    return NamedSubjects(query, tuple(keys), tuple(spans))
