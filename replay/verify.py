"""verify: replay the log and compare the result with the state that answers queries.

What answers queries is the projector's state in memory (the fold, the event columns, the recall
indexes built so far) and the checkpoint file it was loaded from. :func:`verify_projection`
folds the log again from seq 1 into a new projector and compares every table row the SQL
surface shows of each namespace (projections/sql_tables.py), every field of every recall index
the live state has built against one built from the replay, and, when a checkpoint is given,
the state saved in it against the replay at the checkpoint's seq (and the postings, turn links and
entities' documents it keeps against its facts' index tokens, source refs and entities, which
that compares).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from eventlog.protocol import Log
from projections.index_tokens import kept_postings_hold
from projections.kept_entities import kept_entity_runs_hold
from projections.kept_turns import kept_turns_hold
from projections.projector import Projector
from projections.sql_tables import TABLES, namespace_rows
from replay.rebuild import rebuild_projection

__all__ = ["ProjectionDiff", "state_rows", "verify_projection"]


@dataclass
class ProjectionDiff:
    """Differences between the live state and a replay of the log: per table (and per recall
    index, and the checkpoint), how many rows are missing and how many are extra."""

    events: int
    tables: dict[str, tuple[int, int]] = field(default_factory=dict)
    examples: list[str] = field(default_factory=list)
    # what was found but is no difference: e.g. a checkpoint on disk that an open refuses
    # (damaged, forged, from another log), so no state is loaded from it to compare
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.tables


def state_rows(projector: Projector) -> dict[str, list[tuple[Any, ...]]]:
    """Every table's rows of every namespace of a state, as tuples (the canonical dump)."""
    out: dict[str, list[tuple[Any, ...]]] = {table: [] for table in TABLES}
    for namespace, space in sorted(projector.spaces()):
        for table, columns in namespace_rows(space.state, space.events, namespace).items():
            out[table] += _tuples(columns)
    return out


def verify_projection(
    log: Log,
    live: Projector,
    *,
    checkpoint: Projector | None = None,
    max_examples: int = 5,
) -> ProjectionDiff:
    """Compare ``live`` (at its last seq) with the log folded from seq 1 to the same seq; with
    ``checkpoint`` (the state loaded from the checkpoint), that state too."""
    report = ProjectionDiff(events=live.last_seq)
    fresh = Projector()
    if checkpoint is not None:
        rebuild_projection(log, upto=checkpoint.last_seq, into=fresh)
        _compare(report, "checkpoint ", state_rows(fresh), state_rows(checkpoint),
                 max_examples)
        for namespace, space in sorted(checkpoint.spaces()):
            if not kept_postings_hold(space.state):
                report.tables[f"checkpoint postings {namespace!r}"] = (1, 0)
                report.examples.append(f"checkpoint: the postings kept for {namespace!r} are "
                                       "not the ones its facts' index tokens make")
            if not kept_entity_runs_hold(space.state):
                report.tables[f"checkpoint entity runs {namespace!r}"] = (1, 0)
                report.examples.append(f"checkpoint: the entities' documents kept for "
                                       f"{namespace!r} are not the ones its facts' entities make")
            if not kept_turns_hold(space.state):
                report.tables[f"checkpoint turn links {namespace!r}"] = (1, 0)
                report.examples.append(f"checkpoint: the turn links kept for {namespace!r} are "
                                       "not the ones its facts' source refs make")
        if list(fresh.tx_times) != list(checkpoint.tx_times):
            report.tables["checkpoint tx times"] = (1, 0)
            report.examples.append("checkpoint: the events' tx times differ from the log's")
    rebuild_projection(log, upto=live.last_seq, into=fresh)
    _compare(report, "", state_rows(fresh), state_rows(live), max_examples)
    for namespace, index in live.built_indexes().items():
        want = fresh.indexes.build_now(namespace).fields()
        have = index.fields()
        wrong = sorted(name for name in want if want[name] != have.get(name))
        if wrong:
            report.tables[f"recall index {namespace!r}"] = (len(wrong), 0)
            report.examples.append(f"recall index {namespace!r}: {', '.join(wrong)} differ")
    return report


def _compare(
    report: ProjectionDiff, prefix: str, want: dict[str, list[tuple[Any, ...]]],
    have: dict[str, list[tuple[Any, ...]]], max_examples: int,
) -> None:
    for table in TABLES:
        w, h = Counter(want[table]), Counter(have[table])
        missing, extra = w - h, h - w
        if missing or extra:
            report.tables[prefix + table] = (sum(missing.values()), sum(extra.values()))
            for row in sorted(missing, key=repr)[:max_examples]:
                report.examples.append(f"{prefix}{table}: missing {row!r}")
            for row in sorted(extra, key=repr)[:max_examples]:
                report.examples.append(f"{prefix}{table}: unexpected {row!r}")


def _tuples(columns: dict[str, np.ndarray]) -> list[tuple[Any, ...]]:
    values = [_plain(column) for column in columns.values()]
    return [tuple(row) for row in zip(*values, strict=True)]


def _plain(column: np.ndarray) -> Iterable[Any]:
    """A column's values as Python values (NULL as None, lists as tuples)."""
    if isinstance(column, np.ma.MaskedArray):
        return [None if m else v for v, m in
                zip(column.data.tolist(), np.ma.getmaskarray(column).tolist(), strict=True)]
    return [tuple(v) if isinstance(v, list) else v for v in column.tolist()]
