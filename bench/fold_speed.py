"""The fold alone, one event per call (a write's cost) and in chunks (a replay's), events/s and
bytes per fact.

``python -m bench.fold_speed --facts 100000,1000000``

Events as bench/synthetic.py's store build makes them (~87% remember, ~10% revise, half world
changes and half corrections, ~3% forget; a clock advancing 5 minutes per event; texts from
``TextGen``), with entities resolved as the write path does, stamped with seq and tx_at, then
encoded and decoded as the log does. Timed: the fold of already decoded events (the garbage
collector paused, as replay does); decoding alone is timed for reference. Memory: tracemalloc
of the fold state after the events are gone (decoded inside the traced run, in chunks, as a
replay reads them), per fact; the texts included.
"""

from __future__ import annotations

import argparse
import gc
import random
import sys
import time
import tracemalloc
from collections.abc import Callable
from datetime import datetime, timedelta, timezone

import msgspec

from bench.synthetic import SEED, TextGen
from eventlog.events import Event, FactForgotten, FactRemembered, FactRevised, decode, encode
from projections.entities import fact_entities
from projections.fold import fold, fold_all
from projections.fold_state import FactColumns

__all__ = ["make_payloads", "main"]

CHUNK = 50_000


def make_payloads(n_facts: int, seed: int = SEED) -> list[bytes]:
    """Encoded events creating ``n_facts`` facts (the store build's mix)."""
    gen, rng = TextGen(seed), random.Random(seed)
    t0 = datetime(2024, 1, 1, tzinfo=timezone.utc)
    heads: list[int] = []  # live chain heads
    subject_of: dict[int, str] = {}
    out: list[bytes] = []
    facts = 0
    while facts < n_facts:
        seq = len(out) + 1
        tx = t0 + seq * timedelta(minutes=5)
        r = rng.random()
        ev: FactRemembered | FactRevised | FactForgotten
        if r < 0.10 and len(heads) > 20:
            i = rng.randrange(len(heads))
            subject = subject_of.pop(heads[i])
            text = gen.text(subject)
            vf = tx - timedelta(minutes=4) if r < 0.05 else None  # a world change, or not
            ev = FactRevised(fact_id=heads[i], text=text, valid_from=vf, reason="changed",
                             entities=fact_entities(subject, text))
            heads[i] = seq
            subject_of[seq] = subject
            facts += 1
        elif r < 0.13 and len(heads) > 20:
            i = rng.randrange(len(heads))
            old = heads[i]
            heads[i] = heads[-1]
            heads.pop()
            subject_of.pop(old)
            ev = FactForgotten(fact_id=old, reason="no longer relevant")
        else:
            subject = gen.subject()
            text = gen.text(subject)
            ev = FactRemembered(subject=subject, text=text, entities=fact_entities(subject, text))
            heads.append(seq)
            subject_of[seq] = subject
            facts += 1
        out.append(encode(msgspec.structs.replace(ev, seq=seq, tx_at=tx)))
    return out


def _one_by_one(events: list[Event]) -> FactColumns:
    state = FactColumns()
    for ev in events:
        fold([ev], state)
    return state


def _chunks(events: list[Event]) -> FactColumns:
    state = FactColumns()
    for start in range(0, len(events), CHUNK):
        fold(events[start:start + CHUNK], state)
    return state


FOLDS: dict[str, Callable[[list[Event]], object]] = {
    "one event a call": _one_by_one,
    f"{CHUNK:,} a call": _chunks,
    "all in one call": fold_all,
}


def _timed(fold: Callable[[list[Event]], object], events: list[Event]) -> float:
    gc.collect()
    gc.disable()
    try:
        t0 = time.perf_counter()
        state = fold(events)
        took = time.perf_counter() - t0
    finally:
        gc.enable()
    del state
    return took


def _traced_bytes(payloads: list[bytes]) -> int:
    """Bytes the fold state holds once the events it was folded from are gone."""
    gc.collect()
    tracemalloc.start()
    try:
        state = FactColumns()
        for start in range(0, len(payloads), CHUNK):
            fold([decode(p) for p in payloads[start:start + CHUNK]], state)
        gc.collect()
        size = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    del state
    return size


def text_storage(texts: list[str]) -> tuple[float, float]:
    """Bytes per text: a list of str vs one UTF-8 buffer with int64 offsets."""
    as_str = sum(map(sys.getsizeof, texts)) + 8 * len(texts)
    as_buffer = sum(len(t.encode()) for t in texts) + 8 * len(texts)
    return as_str / len(texts), as_buffer / len(texts)


def id_map_bytes(n_events: int, n_facts: int) -> tuple[float, float]:
    """Bytes per fact of a seq -> slot map: int32 array (one per event) vs dict of ints."""
    d = {i: i for i in range(1000, 1000 + n_facts)}
    as_dict = sys.getsizeof(d) + 28 * 2 * n_facts  # keys and values above 256 are objects
    return 4 * n_events / n_facts, as_dict / n_facts


def run(n_facts: int, memory: bool) -> None:
    t0 = time.perf_counter()
    payloads = make_payloads(n_facts)
    made = time.perf_counter() - t0
    gc.collect()
    t0 = time.perf_counter()
    events = [decode(p) for p in payloads]
    decode_s = time.perf_counter() - t0
    n = len(events)
    print(f"\n{n_facts:,} facts, {n:,} events (generated in {made:.0f} s); "
          f"decode alone {n / decode_s:,.0f} events/s")
    results = {name: _timed(fold, events) for name, fold in FOLDS.items()}
    base = results["one event a call"]
    for name, took in results.items():
        print(f"  {name:<18} {n / took:>10,.0f} events/s  {took:6.2f} s  x{base / took:4.1f}")
    texts = [e.text for e in events if isinstance(e, (FactRemembered, FactRevised))]
    del events
    as_str, as_buffer = text_storage(texts)
    arr, dct = id_map_bytes(n, len(texts))
    print(f"  texts: {as_str:.0f} B/fact as str, {as_buffer:.0f} B/fact as UTF-8 + offsets; "
          f"id->slot: {arr:.1f} B/fact as int32 array, {dct:.0f} B/fact as a dict")
    if memory:
        size = _traced_bytes(payloads)
        print(f"  memory of the fold {size / len(texts):>7,.0f} bytes/fact "
              f"({size / 2**20:,.0f} MiB, texts included)")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--facts", default="100000,1000000", help="comma-separated sizes")
    parser.add_argument("--no-memory", action="store_true", help="skip the tracemalloc runs")
    args = parser.parse_args(argv)
    for n in (int(x) for x in args.facts.split(",")):
        run(n, not args.no_memory)


if __name__ == "__main__":
    main()
