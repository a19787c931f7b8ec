"""Fuzzing: the log decoder against random and mutated bytes; the API against hostile input.

Only typed errors may come out (never a crash, a hang or an unbounded allocation), and a
rejected call appends nothing.
"""

from __future__ import annotations

import math
import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eventlog import format as fmt
from eventlog.log import EventLog
from hmem import Memory, errors
from tests.conftest import examples
from tests.support.backends import BACKENDS, new_store

TYPED = (errors.HmemError,)


def _write_segment(directory: Path, body: bytes, *, header: bool = True) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    prefix = fmt.pack_segment_header(1, fmt.ZERO_CHAIN) if header else b""
    (directory / "00000000000000000001.hlog").write_bytes(prefix + body)


def _open_and_read(directory: Path) -> None:
    try:
        with EventLog(directory, read_only=True) as log:
            list(log.read())
    except TYPED:
        pass


@settings(max_examples=examples(dev=200, ci=1500), suppress_health_check=[HealthCheck.too_slow])
@given(body=st.binary(max_size=2048), header=st.booleans())
def test_random_bytes_as_a_log_give_only_typed_errors(body, header):
    with tempfile.TemporaryDirectory() as d:
        _write_segment(Path(d) / "log", body, header=header)
        _open_and_read(Path(d) / "log")


payloads = st.one_of(
    st.binary(max_size=512),
    st.dictionaries(st.sampled_from(["type", "seq", "tx_at", "namespace", "subject", "text",
                                     "fact_id", "valid_from", "confidence", "vector", "dims"]),
                    st.one_of(st.integers(-2**63, 2**63 - 1), st.text(max_size=20), st.none(),
                              st.floats(), st.binary(max_size=8),
                              st.lists(st.integers(-5, 5), max_size=3)),
                    max_size=8).map(msgspec.msgpack.encode),
)


@settings(max_examples=examples(dev=200, ci=1500), suppress_health_check=[HealthCheck.too_slow])
@given(records=st.lists(payloads, min_size=1, max_size=5))
def test_records_with_valid_checksums_but_garbage_payloads_give_only_typed_errors(records):
    """The framing is right (CRC and chain match), the payload is not an event we know."""
    body, chain = b"", fmt.ZERO_CHAIN
    for payload in records:
        record, chain = fmt.frame(payload, chain)
        body += record
    with tempfile.TemporaryDirectory() as d:
        _write_segment(Path(d) / "log", body)
        _open_and_read(Path(d) / "log")


weird_text = st.text(st.characters(codec=None, categories=None), max_size=60)
weird_float = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-3, 3),
                        st.booleans(), st.text(max_size=3))
weird_time = st.one_of(
    st.none(),
    st.datetimes(timezones=st.just(timezone.utc)),
    st.datetimes(),  # naive: must be refused
    st.text(max_size=25),
    st.sampled_from(["0001-01-01", "9999-12-31", "2025-02-30", "2025-01-01T10:00",
                     "2025-01-01T10:00Z", "-1", "1e309"]),
)


@settings(max_examples=examples(dev=40, ci=300), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(subject=weird_text, text=weird_text, confidence=weird_float, valid_from=weird_time,
       valid_to=weird_time, ns=weird_text, ref=st.one_of(st.none(), weird_text),
       query=weird_text, fact_id=st.one_of(st.integers(-2, 10**20), weird_text, st.none()))
@pytest.mark.parametrize("backend", BACKENDS)
def test_hostile_input_is_a_typed_error_or_a_correct_store(
    backend, subject, text, confidence, valid_from, valid_to, ns, ref, query, fact_id
):
    with new_store(backend) as d:
        clock = iter(datetime(2026, 1, 1, tzinfo=timezone.utc) + timedelta(seconds=i)
                     for i in range(100))
        try:
            m = Memory(d, namespace=ns, embedder="hash-8", clock=lambda: next(clock))
        except TYPED:
            return
        with m:
            calls = [
                lambda: m.remember(subject, text, confidence=confidence, valid_from=valid_from,
                                   valid_to=valid_to, source_ref=ref),
                lambda: m.revise(fact_id, text, valid_from=valid_from),
                lambda: m.forget(fact_id, reason=text),
                lambda: m.recall(query, as_of=fact_id, valid_at=valid_from),
                lambda: m.why(fact_id),
                lambda: m.history(subject),
                lambda: m.sql(query),
                lambda: m.events(subject=subject),
            ]
            for call in calls:
                m.flush()  # the background embeddings of earlier calls are in the log
                before = m.last_seq
                try:
                    call()
                except TYPED:
                    assert m.last_seq == before  # a rejected call appends nothing
            assert m.verify().ok
            for fact in m.store.projector.state.facts.values():
                assert fact.namespace == ns
                assert isinstance(fact.confidence, float | int)
                assert math.isfinite(fact.confidence)
