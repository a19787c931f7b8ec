"""The longitudinal benchmark's data: generated agent histories in which facts change over time.

``generate(seed, people)`` is deterministic (``random.Random(seed)`` only); ``digest`` pins a
version (sha256 of the dataset's canonical JSON, which carries ``DATASET_VERSION``).

Each person (subject ``Maya7``: a first name plus a unique number) has four attributes, stated
with one template each: city ("Maya7 lives in Lisbon"), employer ("Maya7 works at Initech"),
drink ("Maya7 prefers green tea") and pet ("Maya7 has a pet dog named Rex"). Over two years
(2024-2025) the agent hears, in sessions of its own (``source_ref`` "s12:t3"):

* ``state``: the first statement of an attribute, true since ``valid_from`` (months or years
  before the agent heard it);
* ``change``: the world changed at ``valid_from`` (0-25 days before the agent heard it);
* ``correction``: the attribute's previous statement was misheard, its value was never true;
  the corrected value holds over the wrong one's whole valid period (``valid_from`` is None);
* ``retraction``: the user asks to forget the attribute; nothing more is said about it.

Transaction times (when the agent heard it) strictly increase over the whole dataset.

Questions and their answers come from the reference model below (:func:`believed`,
:func:`world`, :func:`changed`), from the generated statements alone:

* ``now``: the attribute's value after the whole history (None if retracted);
* ``valid_at``: the value true in the world at a date, as known at the end (corrections apply
  retroactively). Asked only of attributes never retracted: a retraction withdraws the
  agent's knowledge, not the past, so its world truth is not the agent's to answer;
* ``believed_at``: the value the agent believed at a moment (a wrong value until corrected;
  None before the first statement and after a retraction);
* ``changed_between``: the sorted attributes of a subject whose believed value differs between
  two moments (a retraction is a change to None);
* ``source``: the ``source_ref`` of the statement behind the current belief (asked only of
  attributes still believed).

Moments (``believed_at``, ``changed_between``) are 23:59 UTC, after every statement of that
day; dates (``valid_at``) are noon UTC, never on a ``valid_from`` (midnight). A question's
``probe`` says how its time was picked: ``random``, or set on a trap (``late news``,
``corrected period``, ``misheard value``, ``after retraction``; see ``_questions``).
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from typing import Literal

import msgspec

__all__ = [
    "ATTRIBUTES", "DATASET_VERSION", "QUERIES", "QUESTION_KINDS", "START", "TEMPLATES",
    "Answer", "Dataset", "Question", "Statement", "believed", "believed_value", "changed",
    "digest", "generate", "periods", "world",
]

DATASET_VERSION = "longitudinal-v1"
START = datetime(2024, 1, 1, tzinfo=timezone.utc)
DAYS = 730
ATTRIBUTES = ("city", "employer", "drink", "pet")
TEMPLATES = {
    "city": "{s} lives in {v}",
    "employer": "{s} works at {v}",
    "drink": "{s} prefers {v}",
    "pet": "{s} has a pet {v}",
}
QUERIES = {  # the question every system asks its store, per attribute
    "city": "where does {s} live",
    "employer": "where does {s} work",
    "drink": "what does {s} prefer to drink",
    "pet": "what pet does {s} have",
}
NOUNS = {"city": "city", "employer": "employer", "drink": "drink", "pet": "pet"}

Kind = Literal["state", "change", "correction", "retraction"]
QKind = Literal["now", "valid_at", "believed_at", "changed_between", "source"]
QUESTION_KINDS: tuple[QKind, ...] = ("now", "valid_at", "believed_at", "changed_between", "source")
Answer = str | list[str] | None

_NAMES = """Maya Leo Ana Raj Ines Tom Nora Omar Lena Ivan Sara Ken Ada Luis Mia Yuki Zoe Finn Eva
Hugo Ruth Amir Lila Noah Iris Theo Emma Kai Rosa Otto Vera Jan Alma Dev Nina Paul Esme Tariq Lucy
Marc""".split()
_VALUES = {
    "city": """Lisbon Lyon Porto Berlin Oslo Madrid Vienna Prague Dublin Krakow Seville Turin
Ghent Bergen Tallinn Zurich Munich Milan Geneva Bristol Leeds Toronto Denver Austin Osaka Kyoto
Seoul|New York|San Diego|Buenos Aires|Cape Town|Rio de Janeiro""",
    "employer": """Acme Robotics|Globex|Initech|Umbrella Labs|Stark Industries|Wayne Foods|Hooli|
Pied Piper|Vandelay Imports|Soylent Corp|Cyberdyne Systems|Tyrell Corp|Wonka Confections|Oscorp|
Dunder Mifflin|Monarch Solutions|Blue Sun|Aperture Science|Black Mesa|Massive Dynamic""",
    "drink": """green tea|black coffee|oat latte|espresso|chai|sparkling water|orange juice|
hot chocolate|matcha|mint tea|cold brew|kombucha|lemonade|earl grey|flat white|rooibos""",
}
_SPECIES = "dog cat parrot rabbit hamster tortoise ferret goldfish".split()
_PET_NAMES = """Rex Luna Milo Pixel Nala Oscar Biscuit Pepper Ziggy Mochi Olive Hugo Kiwi Toffee
Juno Bean""".split()
_CHANGES = {"city": (1, 4), "employer": (1, 3), "drink": (0, 4), "pet": (0, 2)}
P_CORRECTION = 0.22  # a change/state is followed by a correction of it
P_RETRACTION = 0.12  # per attribute, at the end of its history


class Statement(msgspec.Struct, frozen=True):
    """One thing the agent heard: at ``tx`` (transaction time), in session turn ``source_ref``."""

    tx: datetime
    kind: Kind
    subject: str
    attribute: str
    value: str | None  # None for a retraction
    valid_from: datetime | None  # state / change only
    source_ref: str
    text: str  # as the agent would store it


class Question(msgspec.Struct, frozen=True):
    """``at``: the date (valid_at) or moment (believed_at, changed_between's first) asked
    about; ``until``: changed_between's second moment. ``answer``: a value, a sorted list of
    attributes (changed_between) or None (nothing is true / believed)."""

    id: str
    kind: QKind
    subject: str
    attribute: str | None
    at: datetime | None
    until: datetime | None
    answer: Answer
    probe: str  # how the moment was picked: "random", or the trap it is set at


class Dataset(msgspec.Struct, frozen=True):
    version: str
    seed: int
    people: int
    subjects: list[str]
    statements: list[Statement]
    questions: list[Question]


def digest(dataset: Dataset) -> str:
    """sha256 of the dataset's canonical JSON (msgspec, fields in declaration order)."""
    return hashlib.sha256(msgspec.json.encode(dataset)).hexdigest()


def text_of(subject: str, attribute: str, value: str) -> str:
    return TEMPLATES[attribute].format(s=subject, v=value)


# ------------------------------------------------------------------------- reference model


def believed(history: Sequence[Statement], subject: str, attribute: str,
             at: datetime) -> Statement | None:
    """The statement behind the agent's belief at moment ``at`` (None: nothing believed)."""
    current = None
    for st in history:
        if st.tx > at:
            break
        if st.subject == subject and st.attribute == attribute:
            current = None if st.kind == "retraction" else st
    return current


def believed_value(history: Sequence[Statement], subject: str, attribute: str,
                   at: datetime) -> str | None:
    st = believed(history, subject, attribute, at)
    return None if st is None else st.value


def periods(history: Sequence[Statement], subject: str,
            attribute: str) -> list[tuple[datetime, str]]:
    """The world's (valid_from, value) periods as known after the whole history: a correction
    replaces the value of the period it corrects."""
    out: list[tuple[datetime, str]] = []
    for st in history:
        if st.subject != subject or st.attribute != attribute:
            continue
        if st.kind in ("state", "change"):
            assert st.valid_from is not None and st.value is not None
            out.append((st.valid_from, st.value))
        elif st.kind == "correction":
            assert st.value is not None
            out[-1] = (out[-1][0], st.value)
    return out


def world(history: Sequence[Statement], subject: str, attribute: str, at: datetime) -> str | None:
    """What was true in the world at ``at`` (None before the first period)."""
    value = None
    for valid_from, v in periods(history, subject, attribute):
        if valid_from <= at:
            value = v
    return value


def changed(history: Sequence[Statement], subject: str, since: datetime,
            until: datetime) -> list[str]:
    """The attributes whose believed value at ``until`` differs from that at ``since``."""
    return sorted(a for a in ATTRIBUTES
                  if believed_value(history, subject, a, since)
                  != believed_value(history, subject, a, until))


# ------------------------------------------------------------------------------- generator


def _pool(attribute: str) -> list[str]:
    raw = _VALUES[attribute]
    if attribute == "city":
        words, _, multi = raw.partition("|")
        return words.split() + multi.split("|")
    return [v.strip() for v in raw.replace("\n", "").split("|")]


def _plan(rng: random.Random) -> list[tuple[int, str, Kind]]:
    """One person's (day, attribute, kind) events, every day distinct."""
    used: set[int] = set()

    def free(lo: int, hi: int) -> int | None:
        options = [d for d in range(lo, hi + 1) if d not in used]
        if not options:
            return None
        day = rng.choice(options)
        used.add(day)
        return day

    events: list[tuple[int, str, Kind]] = []
    for attribute in ATTRIBUTES:
        first = free(0, 300)
        assert first is not None
        days = sorted(d for d in (free(first + 1, DAYS - 40)
                                  for _ in range(rng.randint(*_CHANGES[attribute])))
                      if d is not None)
        kinds: list[Kind] = ["state"]
        for _ in days:
            kinds.append("correction" if kinds[-1] != "correction"
                         and rng.random() < P_CORRECTION else "change")
        events += list(zip([first, *days], [attribute] * (len(days) + 1), kinds, strict=True))
        if rng.random() < P_RETRACTION:
            day = free(max([first, *days]) + 1, DAYS - 1)
            if day is not None:
                events.append((day, attribute, "retraction"))
    return sorted(events)


def _statements(rng: random.Random, subjects: list[str]) -> list[Statement]:
    planned = [(day, rng.random(), subject, attribute, kind)
               for subject in subjects for day, attribute, kind in _plan(rng)]
    planned.sort(key=lambda p: (p[0], p[1]))  # a person's days are distinct: its order holds
    state: dict[tuple[str, str], tuple[str, datetime]] = {}  # (value, world valid_from)
    out: list[Statement] = []
    rank_in_day: dict[int, int] = {}
    for session, (day, _, subject, attribute, kind) in enumerate(planned, start=1):
        rank = rank_in_day[day] = rank_in_day.get(day, -1) + 1
        if rank >= 900:  # a minute each from 08:00, all before the day's 23:59 moment
            raise ValueError("too many people: over 900 statements on one day")
        tx = START + timedelta(days=day, hours=8, minutes=rank, seconds=rng.randint(0, 59))
        today = START + timedelta(days=day)
        ref = f"s{session}:t{rng.randint(1, 9)}"
        key = (subject, attribute)
        noun = NOUNS[attribute]
        if kind == "retraction":
            del state[key]
            out.append(Statement(tx, kind, subject, attribute, None, None, ref,
                                 f"forget {subject}'s {noun}"))
            continue
        old = state.get(key)
        value = _choose(rng, attribute, None if old is None else old[0])
        valid_from: datetime | None
        if kind == "state":
            valid_from = today - timedelta(days=rng.randint(30, 1500))
            state[key] = (value, valid_from)
        elif kind == "change":
            assert old is not None
            valid_from = max(today - timedelta(days=rng.randint(0, 25)),
                             old[1] + timedelta(days=1))
            state[key] = (value, valid_from)
        else:
            assert old is not None
            valid_from = None
            state[key] = (value, old[1])
        out.append(Statement(tx, kind, subject, attribute, value, valid_from, ref,
                             text_of(subject, attribute, value)))
    return out


def _choose(rng: random.Random, attribute: str, avoid: str | None) -> str:
    while True:
        if attribute == "pet":
            v = f"{rng.choice(_SPECIES)} named {rng.choice(_PET_NAMES)}"
        else:
            v = rng.choice(_pool(attribute))
        if v != avoid:
            return v


def _moment(day: int) -> datetime:
    return START + timedelta(days=day, hours=23, minutes=59)


def _date(day: int) -> datetime:
    return START + timedelta(days=day, hours=12)


def _questions(rng: random.Random, subjects: list[str],
               history: list[Statement]) -> list[Question]:
    end = history[-1].tx
    out: list[Question] = []

    def ask(kind: QKind, subject: str, attribute: str | None, at: datetime | None,
            until: datetime | None, answer: Answer, probe: str = "random") -> None:
        out.append(Question(f"q{len(out) + 1:04d}", kind, subject, attribute, at, until, answer,
                            probe))

    for subject in subjects:
        mine = [st for st in history if st.subject == subject]  # the model reads no other
        retracted = {st.attribute for st in mine if st.kind == "retraction"}
        for a in ATTRIBUTES:
            st = believed(mine, subject, a, end)
            ask("now", subject, a, None, None, None if st is None else st.value)
        for a in ATTRIBUTES:
            st = believed(mine, subject, a, end)
            if st is not None:
                ask("source", subject, a, None, None, st.source_ref)
        # valid_at: 3 of 5 (while there are such dates) where notes dated by when the agent
        # heard them go wrong: the world changed before it heard ("late news"), or the period
        # of a statement later corrected ("corrected period"); the others at random.
        kept = [a for a in ATTRIBUTES if a not in retracted]
        tricky: list[tuple[str, int, str]] = []
        for i, st in enumerate(mine):
            day = (st.tx - START).days
            if st.kind == "change" and st.valid_from is not None:
                lag = (st.tx - st.valid_from).days
                if lag >= 1 and st.attribute in kept:
                    tricky.append((st.attribute, day - rng.randint(1, lag), "late news"))
            if st.kind == "correction" and st.attribute in kept:
                wrong = next(w for w in reversed(mine[:i]) if w.attribute == st.attribute)
                tricky.append((st.attribute, rng.randint((wrong.tx - START).days, day),
                               "corrected period"))
        for n in range(5):
            if n % 2 == 0 and tricky:
                a, day, probe = tricky.pop(rng.randrange(len(tricky)))
            else:
                a, day, probe = rng.choice(kept), rng.randint(0, DAYS - 1), "random"
            ask("valid_at", subject, a, _date(day), None, world(mine, subject, a, _date(day)),
                probe)
        # believed_at: 3 of 5 (while there are such moments) while a wrong value was believed
        # ("misheard value") or after a retraction; the others at random.
        moments: list[tuple[str, int, str]] = []
        for i, st in enumerate(mine):
            day = (st.tx - START).days
            if st.kind == "correction":
                wrong = next(w for w in reversed(mine[:i]) if w.attribute == st.attribute)
                moments.append((st.attribute, rng.randint((wrong.tx - START).days, day - 1),
                                "misheard value"))
            if st.kind == "retraction":
                moments.append((st.attribute, rng.randint(day, DAYS - 1), "after retraction"))
        for n in range(5):
            if n % 2 == 0 and moments:
                a, day, probe = moments.pop(rng.randrange(len(moments)))
            else:
                a, day, probe = rng.choice(ATTRIBUTES), rng.randint(0, DAYS - 1), "random"
            ask("believed_at", subject, a, _moment(day), None,
                believed_value(mine, subject, a, _moment(day)), probe)
        for _ in range(5):
            lo = rng.randint(0, DAYS - 60)
            hi = min(DAYS - 1, lo + rng.randint(15, 240))
            ask("changed_between", subject, None, _moment(lo), _moment(hi),
                changed(mine, subject, _moment(lo), _moment(hi)))
    return out


def generate(seed: int = 1, people: int = 40) -> Dataset:
    """The dataset of ``people`` persons drawn with ``random.Random(seed)``."""
    if people < 1:
        raise ValueError("people must be at least 1")
    rng = random.Random(seed)
    subjects = [f"{rng.choice(_NAMES)}{i + 1}" for i in range(people)]
    history = _statements(rng, subjects)
    questions = _questions(rng, subjects, history)
    return Dataset(DATASET_VERSION, seed, people, subjects, history, questions)
