"""The ranking of recall, and its knobs: BM25 and vector candidates, fused, then weighted by
recency, confidence, entities and time (the formula: :mod:`hmem.recall.request`). Touches numpy
arrays of the namespace's recall index; loops in Python only over the hits it returns."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, fields, replace
from functools import partial

import msgspec
import numpy as np

from hmem.embedders.blas import one_blas_thread
from hmem.errors import InvalidInput
from hmem.recall.evidence import Cosines, evident
from hmem.recall.hits import Hit, RecallResult, context_of, hit_of
from hmem.recall.judgement import judgement_factor, pinned_docs
from hmem.recall.loans import Bound, Lists, Loans, Words, borrow, lend, own_words
from hmem.recall.subjects import QUERY_WORD, named_subjects
from hmem.recall.top import top, top_of
from projections.arrays import distinct, in_sorted
from projections.entities import extract_entities, normalize_entity
from projections.fold_state import FactColumns, FactsView
from projections.projector import Projector
from projections.recall_index import NamespaceIndex
from projections.records import Fact, subject_key
from projections.text import STOPWORDS, tokenize

__all__ = [
    "CODES_FROM", "DENSE_SEARCHES", "FUSIONS", "RecallConfig", "RecallQuery", "rank",
    "ranked_order",
]

_DAY_US = 86_400 * 1_000_000
_SMALL_PRODUCT = 1 << 22  # vector values a product reads on one BLAS thread (16 MB float32)
FUSIONS = ("rrf", "weighted")
DENSE_SEARCHES = ("auto", "exact", "codes")
CODES_FROM = 20_000  # "auto" searches codes from this many vectors of the query's model on


@dataclass(frozen=True)
class RecallConfig:
    """Ranking knobs. ``recency_weight`` 0 ignores age; 1 multiplies by the full decay."""

    half_life_days: float = 90.0
    recency_weight: float = 0.05  # a tie-breaker: a true old fact must not lose to a new aside
    limit: int = 10
    max_tokens: int | None = None  # a token budget for the hits; None: ``limit`` hits
    chars_per_token: float = 4.0
    fusion: str = "rrf"  # or "weighted"
    rrf_k: float = 10.0
    bm25_weight: float = 1.0
    dense_weight: float = 0.75
    candidates: int = 100  # taken from each ranked list before fusion
    entity_boost: float = 0.25
    # A question that names a subject (hmem.recall.subjects): the facts of that subject score
    # x (1 + subject_boost * share), and the query's vector is made without the name unless
    # ``embed_subject_names``
    subject_boost: float = 0.75
    embed_subject_names: bool = False
    # The subject the first person of a query names (I, me, my: the person the agent serves):
    # favoured as a named subject is. "" : the first person names no one
    asker_subject: str = "user"
    time_boost: float = 0.5
    neighbor_weight: float = 0.5  # a turn also scores with its previous turn's match, times this
    next_weight: float = 0.6  # ... and with its next turn's, times this
    context_turns: int = 0  # attach up to this many neighbouring turns on each side of a hit
    dense_neighbors: bool = False  # neighbour weights apply to cosines too
    feedback_docs: int = 2  # pseudo-relevance feedback: expand the query from the top docs...
    feedback_terms: int = 10  # ... with this many of their best terms ...
    feedback_weight: float = 0.3  # ... each weighted this much against a query term (0 = off)
    # Dense search: "exact" scores every vector; "codes" ranks by sign-bit codes and re-scores
    # the best ``dense_rerank`` (projections.dense); "auto" is "codes" from CODES_FROM vectors.
    dense_search: str = "auto"
    dense_rerank: int = 1000
    # No hit without its own evidence (hmem.recall.evidence): a query word, a cosine of at
    # least ``min_cosine``, or a neighbour with either lending it a match. False: any candidate
    # the ranking reached may be returned (recalls logged before the rule replay that way).
    require_evidence: bool = True
    min_cosine: float = 0.45  # MiniLM and hash: see hmem.recall.evidence
    # What extraction judged (hmem.recall.judgement; all off: no benchmark carries judgements):
    importance_weight: float = 0.0  # x (1 + w * (importance - 5) / 5); no importance: x 1
    semantic_weight: float = 1.0  # a fact of this category scores times its weight
    episodic_weight: float = 1.0
    procedural_weight: float = 1.0
    pin_procedural: int = 0  # this many visible procedural facts lead every result

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in _CHOICES:
                if value not in _CHOICES[f.name]:
                    raise InvalidInput(
                        f"RecallConfig.{f.name} must be one of "
                        f"{', '.join(map(repr, _CHOICES[f.name]))}, not {value!r}"
                    )
            elif f.name == "max_tokens":
                if value is not None and (
                    isinstance(value, bool) or not isinstance(value, int) or value < 1
                ):
                    raise InvalidInput(f"RecallConfig.max_tokens must be None (no budget) or an "
                                       f"integer >= 1, not {value!r}")
            elif f.name == "asker_subject":
                if not isinstance(value, str):
                    raise InvalidInput(f"RecallConfig.asker_subject must be a subject (a str; "
                                       f"\"\" for none), not {value!r}")
            elif f.name in ("dense_neighbors", "require_evidence", "embed_subject_names"):
                if not isinstance(value, bool):
                    raise InvalidInput(f"RecallConfig.{f.name} must be True or False, "
                                       f"not {value!r}")
            elif f.type == "int":
                low = 1 if f.name in _AT_LEAST_ONE else 0
                if isinstance(value, bool) or not isinstance(value, int) or value < low:
                    raise InvalidInput(
                        f"RecallConfig.{f.name} must be an integer >= {low}, not {value!r}"
                    )
            else:
                low_text, ok = _FLOAT_RANGES.get(f.name, (">= 0", _non_negative))
                if (
                    isinstance(value, bool) or not isinstance(value, (int, float))
                    or not math.isfinite(value) or not ok(value)
                ):
                    raise InvalidInput(
                        f"RecallConfig.{f.name} must be a finite number {low_text}, not {value!r}"
                    )
                if isinstance(value, float) and type(value) is not float:  # e.g. np.float64
                    # a float subclass is a plain float here: numpy 2 keeps float32 sums in
                    # float32 for a Python float, and would widen them for a numpy scalar
                    object.__setattr__(self, f.name, float(value))


def _non_negative(x: float) -> bool:
    return x >= 0


_CHOICES = {"fusion": FUSIONS, "dense_search": DENSE_SEARCHES}
_AT_LEAST_ONE = {"limit", "max_tokens", "candidates", "dense_rerank"}
_FLOAT_RANGES: dict[str, tuple[str, Callable[[float], bool]]] = {
    "half_life_days": ("> 0", lambda x: x > 0),
    "chars_per_token": ("> 0", lambda x: x > 0),
    "recency_weight": ("from 0 to 1", lambda x: 0 <= x <= 1),
    "importance_weight": ("from 0 to 1", lambda x: 0 <= x <= 1),
    "min_cosine": ("from -1 to 1", lambda x: -1 <= x <= 1),
}


@dataclass(frozen=True)
class RecallQuery:
    """A request resolved against the store: what the ranking reads (times in microseconds)."""

    text: str
    limit: int
    max_tokens: int
    as_of_seq: int | None  # None: current beliefs
    valid_at_us: int | None
    reference_us: int  # the "now" that ages are measured from
    subject: str | None
    time_range: tuple[int, int] | None = None  # a period the query names
    model: str | None = None  # the embedder's model, when the query has a vector
    vector: np.ndarray | None = None
    explain: bool = False


def rank(
    projector: Projector, namespace: str, config: RecallConfig, query: RecallQuery
) -> RecallResult:
    """The hits of ``query``, best first, within its limit and token budget. Neighbouring turns
    and feedback terms lend their match under the rules of :mod:`hmem.recall.loans`: only a fact
    believed at the query's time lends, and a loan never lifts a fact above a fact it merely
    borrows from (so an exact match is never outranked by neighbours that borrow it)."""
    limit, max_tokens, explain = query.limit, query.max_tokens, query.explain
    as_of_seq, valid_at_us, subject = query.as_of_seq, query.valid_at_us, query.subject
    reference_us, time_range = query.reference_us, query.time_range
    query_vector, model = query.vector, query.model
    index = projector.indexes.get(namespace)
    tokens = tokenize(query.text) or tokenize(query.text, keep_stopwords=True)
    if index is None or not len(index):
        return RecallResult(query.text, (), 0, 0)
    state = projector.space(namespace).state
    seq = projector.last_seq if as_of_seq is None else as_of_seq
    key = None if subject is None else subject_key(subject)
    if key is not None and index.subject_mask(np.empty(0, dtype=np.int64), key) is None:
        return RecallResult(query.text, (), 0, 0)

    def believed(docs: np.ndarray | None) -> np.ndarray:  # at the query's time, any subject
        if as_of_seq is None and valid_at_us is None:
            return index.current_mask(docs)  # ``None``: every document
        return index.visible_mask(docs, seq, valid_at_us)

    def of_subject(keep: np.ndarray, docs: np.ndarray | None) -> np.ndarray:
        if key is not None:
            keep &= index.subject_mask(docs, key)
        return keep

    def visible(docs: np.ndarray | None) -> np.ndarray:
        return of_subject(believed(docs), docs)

    depth = max(config.candidates, 4 * limit)
    lists: Lists = {}
    n = len(index)
    alpha, beta = config.neighbor_weight, config.next_weight
    loans: Loans | None = None  # neighbours' and feedback's shares (see hmem.recall.loans)
    words: Words | None = None
    own_cosines: Cosines | None = None  # for hmem.recall.evidence
    showable: np.ndarray | None = None  # visible(None), made once when needed
    if tokens:
        words = own_words(index, tokens)
        lending = believed(None)  # only a fact believed at the query's time lends
        showable = of_subject(lending.copy(), None)
        fed = words.own.copy()
        fed_from, postings = np.empty(0, dtype=np.int64), sum(map(len, words.postings))
        if config.feedback_docs and config.feedback_terms and config.feedback_weight > 0:
            fed_from, added = _feedback(index, state, tokens, words, showable, config, fed)
            postings += added
        loans = borrow(index, words, fed, lending, postings, fed_from, alpha, beta)
        lists["bm25"] = top_of(loans.lexical, showable, depth, loans.scored, loans.repeats)
    vectors = index.vectors.get(model) if model is not None else None
    lend_cosines = bool((alpha or beta) and config.dense_neighbors)
    if query_vector is not None and vectors is not None and _codes(config, vectors.count,
                                                                  lend_cosines):
        with _small_blas(n, vectors.dims):
            docs, cosines = vectors.candidates(query_vector, n,
                                               visible(None) if showable is None else showable,
                                               max(config.dense_rerank, depth))
        lists["dense"] = top(docs, cosines, depth)
        own_cosines = Cosines(docs, cosines, vectors, query_vector)
    elif query_vector is not None and vectors is not None:
        with _small_blas(n, vectors.dims):
            cosines, has = vectors.scores(query_vector, n)
        docs = np.flatnonzero(has)
        own_cosines = Cosines(np.arange(n), np.where(has, cosines, -np.inf), vectors,
                              query_vector)
        if lend_cosines:
            cosines[docs[~believed(docs)]] = 0  # only believed facts lend
            if loans is not None:
                loans = replace(loans, cosines=cosines)
            cosines = lend(index, cosines, alpha, beta)
        keep = visible(docs)
        lists["dense"] = top(docs[keep], cosines[docs[keep]], depth)
    if loans is not None:
        lists["bm25"] = loans.with_lenders(index, lists, visible)
    if not any(len(d) for d, _ in lists.values()):
        hits, used = _pinned(projector, index, namespace, config, query, visible)
        return RecallResult(query.text, tuple(hits), used, 0)

    cand, parts = _fuse(lists, config)
    relevance = np.sum(list(parts.values()), axis=0)
    ids, recency, confidence = index.ranking_arrays(cand)
    age_days = np.maximum(reference_us - recency, 0) / _DAY_US
    w = config.recency_weight
    recency_factor = (1.0 - w) + w * np.power(0.5, age_days / config.half_life_days)
    entity_factor = _entity_factor(index, cand, query.text, config.entity_boost)
    subject_factor = named_subjects(index, query.text, config.asker_subject).factor(
        index, cand, config.subject_boost)
    time_factor = np.ones(len(cand))
    if time_range is not None:
        time_factor = _time_factor(index, cand, seq, valid_at_us, time_range, config.time_boost)
    factor = confidence * recency_factor * entity_factor * subject_factor * time_factor
    weights = {"semantic": config.semantic_weight, "episodic": config.episodic_weight,
               "procedural": config.procedural_weight}
    if config.importance_weight or any(w != 1.0 for w in weights.values()):
        factor = factor * judgement_factor(state, ids, config.importance_weight, weights)
    score = relevance * factor
    bound = _NO_BOUND
    if loans is not None:  # a loan never lifts a fact above a fact it merely borrows from
        score, bound = loans.cap(index, cand, lists, parts, partial(_contribution, config),
                                 factor, score)

    hits, used = _pinned(projector, index, namespace, config, query, visible)
    pinned_ids = {h.id for h in hits}
    shown: set[int] = set(np.flatnonzero(np.isin(ids, list(pinned_ids))).tolist())  # lenders too
    limit += len(hits)  # pinned facts lead, beyond the limit
    returnable = np.arange(len(cand))
    if config.require_evidence:  # no hit without its own evidence (hmem.recall.evidence)
        returnable = returnable[evident(index, cand, words, own_cosines, config.min_cosine,
                                        believed, alpha, beta)]
    order = (int(returnable[at]) for at in ranked_order(score[returnable], ids[returnable],
                                                         max(4 * limit, _MIN_TOP)))
    for rank, fact in _with_facts(state.facts, ids, order, lambda: limit - len(hits)):
        if len(hits) >= limit:
            break
        if int(ids[rank]) in pinned_ids:
            continue
        lenders = bound.of(rank)
        if not shown.issuperset(lenders):
            continue  # its lender did not fit the budget: a borrower alone misleads
        row = fact.visible_row(seq, valid_at_us) or fact.rows[-1]
        why = None
        if explain:
            why = {name: round(float(c[rank]), 6) for name, c in parts.items()}
            why.update(
                recency=round(float(recency_factor[rank]), 6),
                confidence=float(confidence[rank]),
                entity=round(float(entity_factor[rank]), 6),
                subject=round(float(subject_factor[rank]), 6),
                time=float(time_factor[rank]),
            )
            if lenders:
                why["below"] = float(ids[lenders[0]])  # the fact id of a lender it ranks below
        hit = hit_of(state.facts, fact, row, float(score[rank]), seq, why)
        if config.context_turns:
            hit = msgspec.structs.replace(
                hit, context=context_of(index, state.facts, fact.id, config.context_turns, visible)
            )
        cost = math.ceil(len(hit.render()) / config.chars_per_token)
        if used + cost > max_tokens:
            continue
        hits.append(hit)
        shown.add(rank)
        used += cost
    omitted = int(np.count_nonzero(~np.isin(ids[returnable], [h.id for h in hits])))
    return RecallResult(query.text, tuple(hits), used, omitted)


def _with_facts(
    facts: FactsView, ids: np.ndarray, order: Iterator[int], wanted: Callable[[], int],
) -> Iterator[tuple[int, Fact]]:
    """Each candidate position of ``order`` with its fact, the facts read ``wanted()`` (the
    hits still to find) at a time: a recall's hits are made together."""
    while (still := wanted()) > 0:  # none once the hits are found: no fact is made
        chunk = list(itertools.islice(order, still))
        if not chunk:
            return
        made = facts.many([int(ids[rank]) for rank in chunk])
        for rank in chunk:
            yield rank, made[int(ids[rank])]


def _pinned(
    projector: Projector, index: NamespaceIndex, namespace: str, config: RecallConfig,
    query: RecallQuery, visible: Callable[[np.ndarray], np.ndarray],
) -> tuple[list[Hit], int]:
    """The pinned procedural facts' hits (``RecallConfig.pin_procedural``) within the token
    budget, and the tokens they use."""
    state = projector.space(namespace).state
    seq = projector.last_seq if query.as_of_seq is None else query.as_of_seq
    hits: list[Hit] = []
    used = 0
    for doc in pinned_docs(state, index, namespace, config.pin_procedural, visible):
        fact = state.facts[int(index.fact_ids[doc])]
        row = fact.visible_row(seq, query.valid_at_us) or fact.rows[-1]
        hit = hit_of(state.facts, fact, row, 0.0, seq, {"pinned": 1.0} if query.explain else None)
        cost = math.ceil(len(hit.render()) / config.chars_per_token)
        if used + cost <= query.max_tokens:
            hits.append(hit)
            used += cost
    return hits, used


def _codes(config: RecallConfig, vectors: int, lend_cosines: bool) -> bool:
    """Whether the dense list comes from codes (not when cosines are lent: that needs them all)."""
    if lend_cosines or config.dense_search == "exact":
        return False
    return config.dense_search == "codes" or vectors >= CODES_FROM


def _feedback(
    index: NamespaceIndex, state: FactColumns, tokens: list[str], words: Words,
    shown: np.ndarray, config: RecallConfig, fed: np.ndarray,
) -> tuple[np.ndarray, int]:
    """Pseudo-relevance feedback (RM3-like): add the best terms of the top visible documents
    (by the query words' scores; ``shown``: which documents are visible) to the query,
    weighted by their tf-idf share there, and add their scores to ``fed``; returns the
    documents whose terms were added and how many postings the terms have."""
    top_docs, top_scores = top_of(words.own, shown, config.feedback_docs,
                                  np.concatenate(words.postings), len(words.postings))
    if not len(top_docs):
        return top_docs, 0
    query = set(tokens)
    weights: dict[str, float] = {}
    best = float(top_scores[0]) or 1.0
    ids = np.frombuffer(index.fact_ids, dtype=np.int64)[top_docs]
    for counts, score in zip(state.term_counts(ids), top_scores.tolist(), strict=True):
        total = sum(counts.values()) or 1
        for term, tf in counts.items():
            if term not in query:
                gain = (score / best) * tf / total * index.text.idf(term)
                weights[term] = weights.get(term, 0.0) + gain
    chosen = sorted(weights.items(), key=lambda kv: (-kv[1], kv[0]))[: config.feedback_terms]
    if not chosen or chosen[0][1] <= 0:  # no term the index knows (idf 0): nothing to add
        return np.empty(0, dtype=np.int64), 0
    top_weight = chosen[0][1]
    expansion = {term: config.feedback_weight * w / top_weight for term, w in chosen}
    index.text.accumulate(expansion, fed)  # BM25 adds up per term
    return top_docs, sum(index.text.df(term) for term in expansion)


def _fuse(
    lists: dict[str, tuple[np.ndarray, np.ndarray]], config: RecallConfig
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Candidate documents (sorted) and each signal's contribution to their relevance."""
    cand = distinct(np.concatenate([docs for docs, _ in lists.values()]))
    parts: dict[str, np.ndarray] = {}
    for name, (docs, scores) in lists.items():
        contribution = np.zeros(len(cand))
        contribution[np.searchsorted(cand, docs)] = _contribution(config, name, scores, scores)
        parts[name] = contribution
    return cand, parts


def _contribution(
    config: RecallConfig, name: str, scores: np.ndarray, values: np.ndarray,
    listed: np.ndarray | None = None,
) -> np.ndarray:
    """What a score of each of ``values`` adds to relevance from the ranked list ``scores`` (best
    first): for its own entries (``listed`` None); or for a document whose score there was
    lowered to ``value`` (``listed``: it was a member, its score there above ``value``; an
    outsider stays out), every other entry unchanged."""
    weight = {"bm25": config.bm25_weight, "dense": config.dense_weight}[name]
    if config.fusion == "rrf":
        # Equal scores share a rank (the best of their positions): ties stay ties.
        ranks = np.searchsorted(-scores, -values, side="left") + 1.0
        if listed is None:
            return weight / (config.rrf_k + ranks)
        ranks -= listed  # a member lowered to ``value`` no longer outscores itself
        return np.where(listed, weight / (config.rrf_k + ranks), 0.0)
    if config.fusion == "weighted":
        best = float(scores.max()) if len(scores) else 0.0
        if best <= 0:
            return np.zeros(len(values))
        out = weight * np.maximum(values, 0) / best
        return out if listed is None else np.where(listed, out, 0.0)
    raise ValueError(f"unknown fusion {config.fusion!r}; use 'rrf' or 'weighted'")


def _entity_factor(index: NamespaceIndex, cand: np.ndarray, query: str, boost: float) -> np.ndarray:
    """1 + boost * (share of the query's entities each candidate names)."""
    if boost <= 0 or not index.entity_docs:
        return np.ones(len(cand))
    words = [normalize_entity(w) for w in QUERY_WORD.findall(query)]
    named = set(extract_entities(query))
    for n in (1, 2, 3):
        for i in range(len(words) - n + 1):
            gram = " ".join(words[i : i + n])
            if gram in index.entity_docs and gram not in STOPWORDS:
                named.add(gram)
    found = [docs for name in named if (docs := index.entity_docs.get(name)) is not None]
    if not found:
        return np.ones(len(cand))
    hits = np.zeros(len(cand))
    for docs in found:  # ascending (EntityDocs.get): searched, not sorted again
        hits += in_sorted(docs, cand)
    return 1.0 + boost * hits / len(found)


def _time_factor(
    index: NamespaceIndex, cand: np.ndarray, seq: int, valid_at_us: int | None,
    time_range: tuple[int, int], boost: float,
) -> np.ndarray:
    """1 + boost for candidates whose shown row's valid period overlaps [start, end)."""
    start, end = time_range
    valid_from, valid_to = index.shown_periods(cand, seq, valid_at_us)
    overlaps = (valid_from < end) & (valid_to > start)  # an open end is NEVER: after any start
    return np.where(overlaps, 1.0 + boost, 1.0)


_MIN_TOP = 32
_NO_BOUND = Bound(np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64))


def _small_blas(n: int, dims: int) -> AbstractContextManager[object]:
    """One BLAS thread for a product over a few thousand vectors: a second thread saves
    nothing there, and spins on a core after each call (a recall over 2,000 facts kept two
    cores busy: a background embedder, another query or process on the machine went without)."""
    return one_blas_thread() if n * dims <= _SMALL_PRODUCT else nullcontext()


def ranked_order(score: np.ndarray, ids: np.ndarray, top: int) -> Iterator[int]:
    """Positions in rank order (best score first; the newer fact, higher id, first on ties).

    Only the ``top`` best are sorted up front; the rest are sorted if the caller gets that far
    (the token budget skipped many hits). The order is that of a full
    ``np.lexsort((-ids, -score))``: every position left for later scores strictly worse than
    every position sorted first.
    """
    neg = -score
    if len(neg) <= top:
        yield from np.lexsort((-ids, neg)).tolist()
        return
    cut = np.partition(neg, top - 1)[top - 1]
    first = neg <= cut  # at least `top` positions; more if the cut falls on a tie
    chosen = np.flatnonzero(first)
    yield from chosen[np.lexsort((-ids[chosen], neg[chosen]))].tolist()
    rest = np.flatnonzero(~first)
    yield from rest[np.lexsort((-ids[rest], neg[rest]))].tolist()
