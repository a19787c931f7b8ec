"""The recall index state a checkpoint part keeps beside its namespace's fold, as columns:
the postings of its facts (projections/index_tokens.py), their source positions and turn links
(projections/kept_turns.py) and their entities' documents (projections/kept_entities.py), each
checked to fit the part's facts when read back."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from projections.arrays import narrow_counts
from projections.compact_columns import narrowest
from projections.fold_state import EntityRuns, KeptTurns, TermPostings

__all__ = [
    "NARROW", "entity_runs_arrays", "kept_entity_runs", "kept_postings", "kept_turns",
    "postings_arrays", "turns_arrays",
]

NARROW = ("turns.", "entity_runs.")  # columns kept in memory as narrow as they are stored


def postings_arrays(postings: TermPostings) -> dict[str, npt.NDArray[Any]]:
    """The postings of a part's facts (term frequencies as counts: most are 1, kept sparse)."""
    return {"postings.codes": postings.codes, "postings.starts": postings.starts,
            "postings.documents": postings.documents,
            "postings.tfs": postings.tfs}


def kept_postings(arrays: dict[str, Any], docs: int, terms: int) -> TermPostings:
    """The postings read back, for a part of ``docs`` facts with index tokens and ``terms``
    terms; ValueError if they do not fit them."""
    codes, starts = arrays["postings.codes"], arrays["postings.starts"]
    documents, tfs = arrays["postings.documents"], arrays["postings.tfs"]
    if len(codes) != len(starts) or len(tfs) != len(documents) or (
        len(codes) and not (starts[0] == 0 and starts[-1] < len(documents)
                            and _ascending(starts) and _ascending(codes)
                            and 0 <= codes[0] and codes[-1] < terms)
    ) or (len(documents) and not 0 <= int(documents.min()) <= int(documents.max()) < docs) or (
        len(tfs) and (tfs.dtype.kind not in "iu" or int(tfs.min()) < 1)
    ):
        raise ValueError("the postings do not fit the part's facts and terms")
    return TermPostings(np.asarray(codes, dtype=np.int32), np.asarray(starts, dtype=np.int64),
                        np.asarray(documents, dtype=np.int32), narrow_counts(tfs), docs)


def turns_arrays(turns: KeptTurns) -> dict[str, npt.NDArray[Any]]:
    """The facts' source positions and turn links (projections/kept_turns.py)."""
    encoded = [v.encode("utf-8", "surrogatepass") for v in turns.sessions]
    lengths = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
    return {"turns.sessions.blob": np.frombuffer(b"".join(encoded), dtype=np.uint8),
            "turns.sessions.ends": np.cumsum(lengths),
            "turns.session": _narrow(turns.session), "turns.turn": _narrow(turns.turn),
            "turns.prev_doc": _narrow(turns.prev_doc), "turns.next_doc": _narrow(turns.next_doc)}


def _narrow(values: npt.NDArray[np.signedinteger[Any]]) -> npt.NDArray[np.signedinteger[Any]]:
    """``values`` as int32 where they fit (so they stay 4 bytes each once loaded), whatever
    type they are held in: a state loaded from a part, which holds them as narrow as they were
    stored, writes the bytes of the state folded from the log."""
    if not len(values) or -(1 << 31) <= int(values.min()) and int(values.max()) < 1 << 31:
        return values.astype(np.int32)
    return values


def kept_turns(arrays: dict[str, Any], facts: int) -> KeptTurns:
    """The source positions and turn links read back, as narrow as they were stored, for a
    part of ``facts`` facts; ValueError if they do not fit them."""
    blob = narrowest(arrays["turns.sessions.blob"]).tobytes()
    ends = narrowest(arrays["turns.sessions.ends"]).tolist()
    sessions = [blob[a:b].decode("utf-8", "surrogatepass")
                for a, b in zip([0, *ends], ends, strict=False)]
    columns = [narrowest(arrays[f"turns.{name}"])
               for name in ("session", "turn", "prev_doc", "next_doc")]
    if any(c.dtype.kind not in "iu" for c in columns):  # unsigned: stored so when none is -1
        raise ValueError("the turn links are not integers")
    turns = KeptTurns(sessions, *columns)
    docs = turns.docs
    if not docs <= facts or {len(turns.turn), len(turns.prev_doc), len(turns.next_doc)} != {
        docs
    } or (docs and not (
        -1 <= int(turns.session.min()) and int(turns.session.max()) < len(sessions)
        and all(-1 <= int(a.min()) and int(a.max()) < docs
                for a in (turns.prev_doc, turns.next_doc))
    )):
        raise ValueError("the turn links do not fit the part's facts")
    return turns


def entity_runs_arrays(runs: EntityRuns) -> dict[str, npt.NDArray[Any]]:
    """The facts' entities' documents (projections/kept_entities.py)."""
    return {"entity_runs.codes": runs.codes, "entity_runs.bounds": runs.bounds,
            "entity_runs.documents": _narrow(runs.documents)}


def kept_entity_runs(arrays: dict[str, Any], facts: int, entities: int) -> EntityRuns:
    """The entity runs read back, the documents as narrow as they were stored, for a part of
    ``facts`` facts naming ``entities`` distinct entities; ValueError if they do not fit."""
    codes, bounds, documents = (narrowest(arrays[f"entity_runs.{name}"])
                                for name in ("codes", "bounds", "documents"))
    if codes.dtype.kind not in "iu" or bounds.dtype.kind not in "iu" or (
        documents.dtype.kind not in "iu"
    ) or len(bounds) != len(codes) + 1 or int(bounds[0]) != 0 or (
        int(bounds[-1]) != len(documents)
    ) or (len(codes) and not (
        _ascending(codes) and 0 <= int(codes[0]) and int(codes[-1]) < entities
        and _ascending(bounds)
        and 0 <= int(documents.min()) and int(documents.max()) < facts
        # ascending within each run: a step down only where a run starts
        and bool(((_steps(documents) >= 0) | _run_heads(bounds, len(documents))).all())
    )):
        raise ValueError("the entity runs do not fit the part's facts and entities")
    return EntityRuns(np.asarray(codes, dtype=np.int32), np.asarray(bounds, dtype=np.int64),
                      documents, facts)


def _run_heads(bounds: npt.NDArray[Any], n: int) -> npt.NDArray[np.bool_]:
    """For each step ``documents[i] -> documents[i + 1]``, whether ``i + 1`` starts a run."""
    heads = np.zeros(max(n - 1, 0), dtype=bool)
    inner = np.asarray(bounds[1:-1], dtype=np.int64) - 1
    heads[inner[(inner >= 0) & (inner < n - 1)]] = True
    return heads


def _steps(values: npt.NDArray[Any]) -> npt.NDArray[np.int64]:
    """Each value less the one before, as int64 (a difference of unsigned values wraps)."""
    wide = np.asarray(values, dtype=np.int64)
    return wide[1:] - wide[:-1]


def _ascending(values: npt.NDArray[Any]) -> bool:
    return bool((_steps(values) > 0).all())
