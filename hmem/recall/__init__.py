"""Recall: a request checked and resolved against the store (``request.py``), ranked
(``ranking.py``, with neighbours' and feedback's loans in ``loans.py`` and extraction's
judgements in ``judgement.py``), its hits (``hits.py``), and recalls logged and replayed
(``logged.py``)."""

from hmem.recall.request import (
    NO_BUDGET,
    ContextTurn,
    Hit,
    PastVersion,
    RecallConfig,
    RecallQuery,
    RecallResult,
)

__all__ = [
    "NO_BUDGET", "ContextTurn", "Hit", "PastVersion", "RecallConfig", "RecallQuery",
    "RecallResult",
]
