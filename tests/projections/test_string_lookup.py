"""A string table read from UTF-8 (projections/string_columns.py) finds, codes and reads its
strings by key (projections/string_lookup.py) without decoding them all, and answers every call
as a table of ``str`` values would: strings that share a key are told apart by their bytes."""

from __future__ import annotations

import sys
import threading

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from projections.string_columns import Strings
from projections.string_lookup import BlobLookup, key_of, keys_of
from tests.conftest import examples

# few letters and long strings: many share a length and their first and last eight bytes
VALUE = st.text(alphabet=st.sampled_from("ab\u00e9\ud800"), max_size=20)


def _utf8(values: list[str]) -> tuple[bytes, list[int]]:
    encoded = [v.encode("utf-8", "surrogatepass") for v in values]
    return b"".join(encoded), np.cumsum([len(e) for e in encoded], dtype=np.int64).tolist()


@settings(max_examples=examples(dev=200, ci=1000))
@given(st.lists(st.binary(max_size=24), max_size=20))
def test_every_strings_key_is_the_key_of_its_bytes_alone(strings):
    ends = np.cumsum([len(s) for s in strings], dtype=np.int64)
    assert keys_of(b"".join(strings), ends).tolist() == [key_of(s) for s in strings]


def test_strings_that_share_a_key_are_found_by_their_bytes():
    values = ["aaaaaaaa1bbbbbbbb", "aaaaaaaa2bbbbbbbb", "aaaaaaaa3bbbbbbbb"]
    blob, ends = _utf8(values)
    assert len(set(keys_of(blob, np.array(ends)).tolist())) == 1
    lookup = BlobLookup(blob, ends)
    assert [lookup.find(v) for v in values] == [0, 1, 2]
    assert lookup.find_many(values * 3 + ["aaaaaaaa4bbbbbbbb"]) == [0, 1, 2] * 3 + [None]
    assert lookup.find("aaaaaaaa4bbbbbbbb") is None


@settings(max_examples=examples(dev=300, ci=1500))
@given(held=st.lists(VALUE, unique=True, max_size=30), asked=st.lists(VALUE, max_size=30))
def test_a_lookup_finds_each_string_it_holds_and_no_other(held, asked):
    lookup = BlobLookup(*_utf8(held))
    want = [held.index(v) if v in held else None for v in held + asked]
    assert lookup.find_many(held + asked) == want
    assert [lookup.find(v) for v in held + asked] == want


CALL = st.one_of(
    st.tuples(st.just("find"), VALUE),
    st.tuples(st.just("code"), VALUE),
    st.tuples(st.just("encode"), st.lists(st.one_of(st.none(), VALUE), max_size=12)),
    st.tuples(st.just("get"), st.integers(-1, 30)),
    st.tuples(st.just("len"), st.none()),
    st.tuples(st.just("values"), st.none()),
)


def _answer(table: Strings, call: str, arg: object) -> object:
    if call == "find":
        return table.find(arg)  # type: ignore[arg-type]
    if call == "code":
        return table.code(arg)  # type: ignore[arg-type]
    if call == "encode":
        return table.encode(arg).tolist()  # type: ignore[arg-type]
    if call == "get":
        return table.get(arg) if arg < len(table) else None  # type: ignore[operator]
    return len(table) if call == "len" else list(table.values)


@settings(max_examples=examples(dev=300, ci=1500))
@given(held=st.lists(VALUE, unique=True, max_size=30), calls=st.lists(CALL, max_size=12))
def test_a_table_read_from_utf8_answers_as_one_of_str_values(held, calls):
    plain, from_utf8 = Strings(), Strings()
    plain.fill(list(held))
    from_utf8.fill_utf8(*_utf8(held))
    for call, arg in calls:
        assert _answer(from_utf8, call, arg) == _answer(plain, call, arg), (call, arg)
    assert from_utf8.values == plain.values
    assert from_utf8.codes == plain.codes


def test_readers_on_many_threads_see_every_value_once_while_the_table_is_decoded():
    """Two threads leave the UTF-8 form at once while a third reads values one at a time: the
    table holds each value once, and every read is the value at its code, of a table of its
    length."""
    held = [f"term{i}" for i in range(5_000)]
    want = [*held, "added"]
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # a thread switch between nearly any two bytecodes
    try:
        for _ in range(10):
            table = Strings()
            table.fill_utf8(*_utf8(held))
            table.code("added")
            wrong: list[object] = []

            def decode(t: Strings = table, out: list[object] = wrong) -> None:
                if len(t.values) != len(want):
                    out.append(len(t.values))

            def read(t: Strings = table, out: list[object] = wrong) -> None:
                out.extend(c for c in range(0, len(want), 7)
                           if t.get(c) != want[c] or len(t) != len(want))
                if t.get(len(want) - 1) != "added":
                    out.append("added")

            threads = [threading.Thread(target=f) for f in (decode, decode, read)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            assert wrong == [] and table.values == want and len(table) == len(want)
    finally:
        sys.setswitchinterval(switch)
