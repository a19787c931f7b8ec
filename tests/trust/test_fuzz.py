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
            every = [f for _, s in m.store.projector.spaces() for f in s.state.facts.values()]
            for fact in every:
                assert fact.namespace == ns
                assert isinstance(fact.confidence, float | int)
                assert math.isfinite(fact.confidence)


# ---------------------------------------------------------------------- documented limits
# (docs/reference.md "Limits"): every text argument over its limit is an InvalidInput naming
# the limit, at every boundary (library, CLI, MCP), before any work, and nothing is written.

def test_every_text_argument_over_its_limit_is_refused_by_the_library(tmp_path):
    from hmem.time.iso import MAX_TIME_CHARS
    from projections.checks import MAX_NAME_CHARS, MAX_TEXT_CHARS

    name, text, when = "n" * (MAX_NAME_CHARS + 1), "t" * (MAX_TEXT_CHARS + 1), "1" * (
        MAX_TIME_CHARS + 1)
    with Memory(tmp_path / "s", embedder=None) as m:
        fid = m.remember("maya", "Maya lives in London")
        calls = {
            "remember text": lambda: m.remember("maya", text),
            "remember subject": lambda: m.remember(name, "x"),
            "remember source_ref": lambda: m.remember("maya", "x", source_ref=name),
            "remember source_agent": lambda: m.remember("maya", "x", source_agent=name),
            "remember request_id": lambda: m.remember("maya", "x", request_id=name),
            "remember entity": lambda: m.remember("maya", "x", entities=[name]),
            "remember valid_from": lambda: m.remember("maya", "x", valid_from=when),
            "remember_many text": lambda: m.remember_many([{"subject": "maya", "text": text}]),
            "revise text": lambda: m.revise(fid, text),
            "revise subject": lambda: m.revise(fid, "x", subject=name),
            "revise reason": lambda: m.revise(fid, "x", reason=name),
            "forget reason": lambda: m.forget(fid, reason=name),
            "recall query": lambda: m.recall(text),
            "recall subject": lambda: m.recall("maya", subject=name),
            "recall source_ref": lambda: m.recall("maya", source_ref=name),
            "recall as_of": lambda: m.recall("maya", as_of=when),
            "recalls source_ref": lambda: m.recalls(source_ref=name),
            "history subject": lambda: m.history(name),
            "episodes session_id": lambda: m.episodes(name),
            "events subject": lambda: m.events(subject=name),
            "sql query": lambda: m.sql("SELECT 1 " + " " * MAX_TEXT_CHARS),
            "diff since": lambda: m.diff(when),
            "consolidate accept": lambda: m.consolidate(accept=[name]),
            "erase subject": lambda: m.erase(subject=name, dry_run=True),
            "erase session": lambda: m.erase(session=name, dry_run=True),
            "erase reason": lambda: m.erase(fact=fid, reason=name, dry_run=True),
            "erase by": lambda: m.erase(fact=fid, by=name, dry_run=True),
            "namespace": lambda: m.in_namespace(name),
        }
        for what, call in calls.items():
            with pytest.raises(errors.InvalidInput, match="limit") as caught:
                call()
            assert "limit" in str(caught.value), what
        assert m.last_seq == int(fid)


def test_a_time_or_query_over_its_limit_is_refused_by_the_cli(tmp_path, capsys):
    from hmem.adapters.cli import main
    from projections.checks import MAX_TEXT_CHARS

    store = str(tmp_path / "s")
    assert main(["--path", store, "--embedder", "none", "remember", "maya", "Maya"]) == 0
    for argv in (["recall", "maya", "--as-of", "9" * 40_000 + " days ago"],
                 ["recall", "maya", "--valid-at", "9" * 5000 + " days ago"],
                 ["remember", "maya", "x", "--valid-from", "9" * 5000 + " days ago"],
                 ["diff", "9" * 40_000 + "h"],
                 ["recall", "q" * (MAX_TEXT_CHARS + 1)],
                 ["history", "s" * 501]):
        capsys.readouterr()
        assert main(["--path", store, "--embedder", "none", *argv]) == 1, argv[:2]
        assert "limit" in capsys.readouterr().err, argv[:2]


def test_a_time_over_its_limit_is_refused_by_mcp_before_any_work(tmp_path):
    pytest.importorskip("mcp")
    import anyio

    from hmem.adapters.mcp_tools import build_server

    with Memory(tmp_path / "s", embedder=None) as m:
        server = build_server(m)
        calls = [("recall", {"query": "maya", "as_of": "9" * 40_000}),
                 ("recall", {"query": "maya", "valid_at": "9" * 5000 + " days ago"}),
                 ("remember", {"subject": "maya", "text": "x", "valid_from": "9" * 40_000}),
                 ("diff", {"since": "9" * 40_000}), ("diff", {"since": 1, "until": "x" * 101})]
        for name, args in calls:
            result = anyio.run(server.call_tool, name, args)
            assert result.is_error and result.structured_content["error"] == "InvalidInput"
            assert "limit of 100 characters; shorten it" in result.structured_content["message"]
        assert m.last_seq == 0
