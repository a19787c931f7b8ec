"""What the stateful test draws and how it compares: namespaces, words, times, stubs, and
failure messages that say which field differs (tests/stateful/test_stateful.py)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import strategies as st

from hmem import errors
from hmem.embedders import HashEmbedder
from hmem.llm import Usage
from hmem.llm.extractor import Candidate, ExtractorOutput
from hmem.recall.hits import PastVersion
from hmem.views import FactView, Version
from tests.stateful.model import US

NAMESPACES = ["default", "o'ther\"; DROP TABLE facts; --"]
# The Memory of each namespace: the default one has no source_agent (so a revise inherits the
# old fact's), the other one its own.
AGENTS = {NAMESPACES[0]: None, NAMESPACES[1]: "agent-2"}
SUBJECTS = ["maya", "Maya", "tom", "the office", "  maya "]
WORDS = ["lives", "london", "paris", "likes", "tea", "works", "at", "acme", "London", "Acme",
         "The"]
START = datetime(2026, 1, 1, tzinfo=timezone.utc)
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
DATES = [
    datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=timezone.utc),  # -1us since the epoch
    datetime(2024, 1, 1, tzinfo=timezone.utc),
    datetime(2025, 1, 1, tzinfo=timezone.utc),
    datetime(2025, 6, 1, tzinfo=timezone.utc),
    datetime(2026, 1, 1, tzinfo=timezone.utc),
    datetime(2026, 1, 1, 12, tzinfo=timezone.utc),
    datetime(2026, 6, 1, tzinfo=timezone.utc),
    datetime(2027, 1, 1, tzinfo=timezone.utc),
]

texts = st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(
    lambda w: "fact " + " ".join(w)
)
padded_texts = texts | texts.map(lambda t: f"  {t} ")
# Valid times: fixed dates, a microsecond after one, or "now" (the clock) and a microsecond
# after it, so periods start and end exactly at, or just beside, each other and tx times.
opt_dates = (
    st.none()
    | st.sampled_from(DATES)
    | st.sampled_from(DATES).map(lambda d: d + US)
    | st.sampled_from(["now", "now+1us"])
)
# Ends: a date as above, or a length after the period's start (so most periods are valid).
opt_ends = opt_dates | st.sampled_from([US, timedelta(days=1), timedelta(days=40)])
namespaces = st.sampled_from(NAMESPACES)


@st.composite
def periods(draw):
    """A valid period for a fact remembered at START: from a date (or from then), to a later
    date, a microsecond later, or open."""
    valid_from = draw(st.none() | st.sampled_from(DATES), label="valid_from")
    start = valid_from or START
    ends = [d for d in DATES if d > start] + [start + US]
    return valid_from, draw(st.none() | st.sampled_from(ends), label="valid_to")


# Calls on a fact are made in its own namespace, or (a quarter of the time) in the other one.
elsewhere = st.sampled_from([False, False, False, True])
confidences = st.sampled_from([1.0, 0.5, 0.0])
entity_args = st.sampled_from([(), ("Paris",), ("  ",), ("Acme's", "acme", " New  York ")])
agents = st.none() | st.just("chat")
refs = st.none() | st.sampled_from(["s1:t3", "D2:4"])
reasons = st.none() | st.just("moved")
ALL = dict(limit=10_000, max_tokens=10**9)
# Every fact also gets a vector, so recall's dense path is held to the same visibility rules.
EMBEDDER = HashEmbedder(16)
TAGS = {"remembered": "remember", "revised": "revise", "forgotten": "forget",
        "embedding": "embed", "episode": "episode", "erased": "erase"}

SESSIONS = ["s1", "s2"]


class StubExtractor:
    """Answers with the given candidates, or fails like a model that never returns valid JSON."""

    prompt_version = "stub-v1"

    def __init__(self, candidates: list[Candidate], fail: bool = False) -> None:
        self.candidates = candidates
        self.fail = fail

    def extract(self, request):
        if self.fail:
            raise errors.LLMResponseInvalid("stub: not JSON")
        return ExtractorOutput(tuple(self.candidates), "stub-model", Usage())


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now


# ---------------------------------------------------------------------- readable comparisons


def epoch_us(t: datetime | None) -> int | None:
    return None if t is None else (t - EPOCH) // US


def _t(t: datetime | None) -> str:
    if t is None:
        return "inf"
    s = t.strftime("%Y-%m-%dT%H:%M:%S")
    return s + (f".{t.microsecond:06d}" if t.microsecond else "")


def _version(v: Version) -> str:
    return (f"valid [{_t(v.valid_from)}, {_t(v.valid_to)}) x tx seq [{v.tx_from_seq}, "
            f"{v.tx_to_seq if v.tx_to_seq is not None else 'inf'}) "
            f"({_t(v.tx_from)} .. {_t(v.tx_to)})")


def _show(name: str, value: object) -> str:
    if name == "versions":
        return "\n      " + "\n      ".join(_version(v) for v in value)  # type: ignore[attr-defined]
    return repr(_plain(value))


def assert_same_view(got: FactView, want: FactView, what: str) -> None:
    if got == want:
        return
    lines = [f"{what}: the store's fact {got.id} differs from the model's fact {want.id}"]
    for name in FactView.__struct_fields__:
        g, w = getattr(got, name), getattr(want, name)
        if g != w:
            lines.append(f"  {name}:\n    store {_show(name, g)}\n    model {_show(name, w)}")
    raise AssertionError("\n".join(lines))


def _plain(x: object) -> object:
    """``x`` with datetimes as short strings, for failure messages."""
    if isinstance(x, datetime):
        return _t(x)
    if isinstance(x, (list, tuple)):
        return type(x)(_plain(v) for v in x) if type(x) in (list, tuple) else x
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, PastVersion):
        return ("past", x.id, x.text, _t(x.valid_from), _t(x.valid_to), x.revision)
    return x


def assert_same(got: object, want: object, what: str) -> None:
    if got != want:
        raise AssertionError(f"{what}:\n  store {_plain(got)!r}\n  model {_plain(want)!r}")


def raises_exactly(expected: str, call) -> None:
    """``call()`` raises exactly ``errors.<expected>`` (not a subclass, not a sibling)."""
    cls = getattr(errors, expected)
    with pytest.raises(errors.HmemError) as info:
        call()
    assert type(info.value) is cls, (
        f"expected {cls.__name__}, got {type(info.value).__name__}: {info.value}"
    )
