"""The stateful test's retries (tests/stateful/test_stateful.py): writes sent with a request id are
retried at any later step (after other writes, erasures, reopen, crash or rebuild): a retry
writes nothing and answers as the first call did, except a remember whose fact was erased since
(its words are gone, so a retry cannot be told from another write: ``RequestIdReused``); the id
given to another kind of write is ``RequestIdReused`` and writes nothing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import event
from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

__all__ = ["RetryRules"]

# a write sent: (namespace, request id, its kind, the call that sends it again, its answer)
Sent = tuple[str, str, str, Callable[[], Any], Any]


class RetryRules:
    """Request ids for the machine's remember and forget, and the rules that retry them."""

    _sent: list[Sent] | None = None

    @property
    def sent(self) -> list[Sent]:
        if self._sent is None:
            self._sent = []
        return self._sent

    def request_id(self, wanted: bool) -> str | None:
        """A fresh request id when ``wanted`` (each write's own), else None."""
        return f"req-{len(self.sent)}-{self.model.last_seq}" if wanted else None  # type: ignore[attr-defined]

    def was_sent(self, ns: str, request_id: str | None, kind: str,
                 call: Callable[[], Any], answer: Any) -> None:
        if request_id is not None:
            self.sent.append((ns, request_id, kind, call, answer))

    @precondition(lambda self: bool(self.sent))
    @rule(data=st.data())
    def retry(self, data: st.DataObject) -> None:
        ns, request_id, kind, call, answer = data.draw(st.sampled_from(self.sent), label="sent")
        before = self.mem.last_seq  # type: ignore[attr-defined]
        if kind == "remember" and answer in self.model.erased():  # type: ignore[attr-defined]
            self._refused("RequestIdReused", call)  # type: ignore[attr-defined]
            event("retried an erased remember")
            return
        assert call() == answer, f"a retried {kind} ({request_id}) answered differently"
        assert self.mem.last_seq == before, f"a retried {kind} ({request_id}) wrote"  # type: ignore[attr-defined]
        event(f"retried a {kind}")

    @precondition(lambda self: bool(self.sent))
    @rule(data=st.data())
    def reuse_request_id(self, data: st.DataObject) -> None:
        """A request id sent with a remember, given to a forget (or the other way round)."""
        ns, request_id, kind, _, answer = data.draw(st.sampled_from(self.sent), label="sent")
        m = self.m(ns)  # type: ignore[attr-defined]
        if kind == "remember":
            def call() -> Any:
                return m.forget(answer, request_id=request_id)
        else:
            def call() -> Any:
                return m.remember("maya", "a different write", request_id=request_id,
                                  dedup=False)
        self._refused("RequestIdReused", call)  # type: ignore[attr-defined]
        event(f"reused a {kind}'s request id")
