"""The benchmarks' synthetic workload: facts, queries, stores built from them, and temp dirs.

Deterministic synthetic sentences (60-120 characters) about a few hundred subjects, words drawn
with Zipf-like weights from a fixed word list (seeded RNG). :func:`build_store` builds a store
through ``Memory`` with fsync=never: ~87% remember, ~10% revise (half with ``valid_from``, half
corrections, always of a live chain head) and ~3% forget, with a simulated clock advancing
5 minutes per event. :class:`TmpDirs` keeps everything in temporary directories under /tmp.
"""

from __future__ import annotations

import os
import random
import shutil
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np

from eventlog.events import FactRemembered
from hmem.adapters.progress import Progress
from hmem.memory import Memory

__all__ = [
    "SEED", "SimClock", "TextGen", "TmpDirs", "build_store", "make_events", "make_queries",
]

SEED = 20240611

# ---------------------------------------------------------------------------------- workload

_WORDS = """
coffee tea morning evening meeting project deadline report budget design review release
server database cluster backup migration upgrade deploy pipeline dashboard metric alert
customer contract invoice payment vendor supplier order shipment warehouse inventory
garden kitchen apartment office studio library museum gallery station airport harbor
bicycle car train flight ticket passport visa hotel booking dinner lunch breakfast recipe
allergy medicine doctor appointment dentist therapy exercise running swimming hiking yoga
guitar piano violin concert album playlist podcast novel chapter article newsletter blog
python rust golang kotlin typescript compiler library framework feature bug ticket sprint
roadmap quarter planning offsite workshop interview candidate hiring onboarding mentor
salary bonus promotion vacation holiday birthday anniversary wedding party gift present
daughter son sister brother mother father cousin friend neighbor colleague manager team
prefers likes dislikes avoids enjoys needs wants owns bought sold moved visited started
finished cancelled postponed scheduled approved rejected signed renewed migrated fixed
broke lost found borrowed returned shared forgot remembered learned taught wrote read
red blue green yellow black white quiet noisy early late weekly monthly daily annual remote
hybrid onsite urgent optional private public shared internal external new old large small
spicy sweet bitter vegetarian vegan gluten dairy peanut oat almond espresso latte cappuccino
matcha jasmine oolong sourdough pasta ramen sushi curry tacos salad soup sandwich pizza
window door balcony roof basement garage fence hedge tree flower tomato basil mint lemon
laptop monitor keyboard mouse headphones charger phone tablet camera printer router cable
password account subscription license renewal refund discount coupon receipt warranty
insurance mortgage rent lease deposit loan savings pension tax audit filing accountant
marathon triathlon league match tournament trophy coach practice training injury recovery
language spanish french german japanese mandarin course lesson exam certificate degree
thesis research paper conference keynote slides poster abstract citation dataset benchmark
latency throughput memory storage network bandwidth cache index query replica shard queue
""".split()
_STOP = "the a and with for of to on at by from every after before during about".split()
_VERBS = """prefers likes dislikes owns uses needs wants booked moved visited started finished
scheduled approved rejected signed renewed fixed lost found borrowed returned shared learned
wrote read bought sold cancelled postponed manages leads joined left recommended""".split()
_PLACES = """Berlin Paris Lisbon Tokyo Osaka Seoul Toronto Denver Austin Boston Chicago Dublin
London Madrid Milan Prague Vienna Zurich Oslo Helsinki Warsaw Athens Cairo Nairobi Lagos Lima
Bogota Santiago Sydney Melbourne Auckland Mumbai Delhi Singapore Jakarta Manila Hanoi""".split()
_FIRST = """Maya Liam Noah Emma Olivia Ava Sophia Lucas Mateo Elena Yuki Hana Ravi Priya Omar
Leila Jonas Freya Tomas Ines Chen Wei Aiko Kenji Sara David Anna Marco Lena Ivan Nadia Felix
Clara Hugo Alma Theo Rosa Pablo Vera Nils""".split()
_LAST = """Chen Garcia Muller Rossi Novak Kim Tanaka Silva Okafor Haddad Larsen Dubois Kowalski
Ivanova Patel Singh Nguyen Cohen Fischer Moreau Costa Berg Santos Yilmaz Sato Ali Brown Walsh
Lindqvist Horvat""".split()


class TextGen:
    """Deterministic synthetic facts: ``(subject, text)`` pairs, texts of 60-120 characters."""

    def __init__(self, seed: int = SEED, n_subjects: int = 300) -> None:
        self.rng = random.Random(seed)
        pairs = [f"{f} {last}" for f in _FIRST for last in _LAST]
        self.rng.shuffle(pairs)
        self.subjects = pairs[:n_subjects]
        # Zipf-like word weights: a few words are common, most are rare (like real text).
        self.words = list(_WORDS)
        self.rng.shuffle(self.words)
        self.weights = [1.0 / (rank + 8) for rank in range(len(self.words))]
        self._cum = list(np.cumsum(self.weights))

    def subject(self) -> str:
        return self.rng.choice(self.subjects)

    def _piece(self) -> str:
        r = self.rng.random()
        if r < 0.06:
            return f"in {self.rng.choice(_PLACES)}"
        if r < 0.22:
            return self.rng.choice(_STOP)
        return self.rng.choices(self.words, cum_weights=self._cum, k=1)[0]

    def text(self, subject: str) -> str:
        target = self.rng.randint(60, 118)
        text = f"{subject} {self.rng.choice(_VERBS)}"
        while len(text) < target:
            piece = self._piece()
            if len(text) + 1 + len(piece) > 119:
                if len(text) >= 60:
                    break
                continue
            text = f"{text} {piece}"
        return text + "."


def make_events(gen: TextGen, n: int) -> list[FactRemembered]:
    base = datetime(2024, 1, 1, tzinfo=timezone.utc)
    out = []
    for i in range(n):
        subject = gen.subject()
        out.append(
            FactRemembered(
                tx_at=base + timedelta(milliseconds=i), subject=subject, text=gen.text(subject)
            )
        )
    return out


def make_queries(texts: list[str], n: int, rng: random.Random) -> list[str]:
    """``n`` queries of 2-4 words sampled from ``texts``."""
    queries = []
    for _ in range(n):
        words = [w.strip(".,").lower() for w in rng.choice(texts).split()]
        k = rng.randint(2, min(4, len(words)))
        queries.append(" ".join(rng.sample(words, k)))
    return queries


# ---------------------------------------------------------------------------------- store build


class SimClock:
    """A clock that advances a fixed step on every call (events spread over about a year)."""

    def __init__(self, start: datetime, step: timedelta) -> None:
        self.now = start
        self.step = step

    def __call__(self) -> datetime:
        self.now = self.now + self.step
        return self.now


def build_store(
    root: Path, gen: TextGen, n_facts: int, rng: random.Random, progress: Progress | None = None
) -> dict[str, Any]:
    """Build a store with ``n_facts`` facts (remember + revise) through Memory, fsync=never."""
    clock = SimClock(datetime(2024, 1, 1, tzinfo=timezone.utc), timedelta(minutes=5))
    mem = Memory(root, fsync="never", flush_every=10**9, clock=clock, embedder=None)
    heads: list[int] = []  # live chain heads (not superseded, not forgotten)
    texts: list[str] = []
    counts = {"remember": 0, "revise_world": 0, "revise_correction": 0, "forget": 0}
    subj_of: dict[int, str] = {}
    pc = time.perf_counter
    t_gen = 0.0  # time spent generating text, subtracted from the build time
    t0 = pc()
    facts = 0
    while facts < n_facts:
        if progress is not None and facts % 1000 == 0:
            progress(facts, n_facts)
        r = rng.random()
        if r < 0.10 and len(heads) > 20:
            i = rng.randrange(len(heads))
            old = heads[i]
            subject = subj_of.pop(old)
            g0 = pc()
            text = gen.text(subject)
            t_gen += pc() - g0
            if r < 0.05:
                vf = clock.now + timedelta(minutes=1)  # after old.valid_from, before next tx
                new = mem.revise(old, text, valid_from=vf, reason="changed")
                counts["revise_world"] += 1
            else:
                new = mem.revise(old, text)
                counts["revise_correction"] += 1
            heads[i] = new
            subj_of[new] = subject
            texts.append(text)
            facts += 1
        elif r < 0.13 and len(heads) > 20:
            i = rng.randrange(len(heads))
            old = heads[i]
            heads[i] = heads[-1]
            heads.pop()
            subj_of.pop(old)
            mem.forget(old, reason="no longer relevant")
            counts["forget"] += 1
        else:
            g0 = pc()
            subject = gen.subject()
            text = gen.text(subject)
            t_gen += pc() - g0
            fid = mem.remember(subject, text)
            heads.append(fid)
            subj_of[fid] = subject
            texts.append(text)
            counts["remember"] += 1
            facts += 1
    t_apply = pc() - t0 - t_gen
    events = mem.last_seq
    t1 = time.perf_counter()
    mem.close()  # writes the whole projection to DuckDB in one batch
    t_close = time.perf_counter() - t1
    return {"events": events, "facts": facts, "counts": counts, "apply_s": t_apply,
            "close_s": t_close, "texts": texts}


class TmpDirs:
    """Temporary directories under /tmp, all removed by :meth:`cleanup`."""

    def __init__(self) -> None:
        base = "/tmp" if os.path.isdir("/tmp") else None
        self.root = Path(tempfile.mkdtemp(prefix="hmem-bench-", dir=base))
        self._n = 0

    def new(self, name: str) -> Path:
        self._n += 1
        path = self.root / f"{self._n:02d}-{name}"
        path.mkdir()
        return path

    def remove(self, path: Path) -> None:
        shutil.rmtree(path, ignore_errors=True)

    def cleanup(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
