"""The log, replay and time-travel workload of ``bench.scale``: N ``FactRemembered`` events,
every other one in namespace ``big`` (N/2 facts), the rest in namespaces of 200 facts each
(``u00000``, ``u00001``, ...: one user with 200 memories, as in the seed's scale story). Texts
are ``bench.recall_workload.make_facts``: 1, 2 or 4 synthetic sentences (60-480 characters), a
third with a rare token (an order number, a ticket id)."""

from __future__ import annotations

from datetime import timedelta

from bench.recall_workload import BASE, make_facts, source_ref, valid_from
from bench.synthetic import SEED, TextGen
from eventlog.events import FactRemembered

__all__ = ["BIG", "PER_USER", "POLICIES", "label_of", "namespace_of", "workload"]

BIG = "big"
PER_USER = 200  # facts per small namespace
POLICIES = ("always", "batch", "never")


def namespace_of(i: int) -> str:
    return BIG if i % 2 == 0 else f"u{(i // 2) // PER_USER:05d}"


def workload(n: int) -> list[FactRemembered]:
    facts = make_facts(TextGen(seed=SEED + 7 * n), n)
    return [
        FactRemembered(
            tx_at=BASE + timedelta(days=400, milliseconds=i), namespace=namespace_of(i),
            subject=subject, text=text, valid_from=valid_from(i, n),
            source_ref=source_ref(i // 2),
        )
        for i, (subject, text) in enumerate(facts)
    ]


def label_of(n: int) -> str:
    return f"{n / 1e6:g}M" if n >= 1_000_000 else f"{n / 1e3:g}k" if n >= 1000 else str(n)
