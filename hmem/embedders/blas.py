"""numpy's BLAS threads while the local model runs, or a recall scores a few thousand vectors:
one process-wide limit of one thread, held while any call needs it (counted, so that calls
which overlap never restore each other's limits out of order) and lifted when the last one
ends.

A one-thread BLAS is what the model's small products want: a query's embedding is a few dozen
tokens, for which BLAS threads cost more to wake than they save, and on a machine whose cores
are busy they wait for one another (measured under load: p95 516 ms with two threads against
11 ms with one, ``bench.recall_busy``'s machine). Calls of several batches run one batch per
thread, each with one BLAS thread. Needs threadpoolctl (the ``local`` extra); without it, or
without a BLAS it can limit, nothing is limited.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["one_blas_thread"]

_LOCK = threading.Lock()
_HELD: list[Any] = []  # the limiter of the calls now running (its original limits), if any
_USERS = [0]  # how many calls hold the limit
_BLAS: list[Any] = []  # the cached threadpoolctl controller, or None when it is not installed


@contextmanager
def one_blas_thread() -> Iterator[bool]:
    """Run the block with numpy's BLAS on one thread; yields whether it could be limited."""
    blas = _controller()
    if blas is None:
        yield False
        return
    with _LOCK:
        if _USERS[0] == 0:
            _HELD.append(blas.limit(limits=1, user_api="blas"))
        _USERS[0] += 1
    try:
        yield True
    finally:
        with _LOCK:
            _USERS[0] -= 1
            if _USERS[0] == 0:
                _HELD.pop().restore_original_limits()


def _controller() -> Any:
    """A cached ``threadpoolctl`` controller of numpy's BLAS; None without threadpoolctl or when
    it finds no BLAS it can limit."""
    if not _BLAS:
        try:
            from threadpoolctl import ThreadpoolController
        except ImportError:
            _BLAS.append(None)
        else:
            blas = ThreadpoolController().select(user_api="blas")
            _BLAS.append(blas if blas.lib_controllers else None)
    return _BLAS[0]
