"""verify: replay the log into a fresh database and compare it with the live projection."""

from __future__ import annotations

from dataclasses import dataclass, field

from eventlog.log import EventLog
from projections.duck import TABLES, DuckProjection
from replay.rebuild import rebuild_projection

__all__ = ["ProjectionDiff", "verify_projection"]


@dataclass
class ProjectionDiff:
    """Differences between the live projection and a replay of the log, per table."""

    events: int
    tables: dict[str, tuple[int, int]] = field(default_factory=dict)  # table -> (missing, extra)
    examples: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.tables


def verify_projection(
    log: EventLog, live: DuckProjection, *, max_examples: int = 5
) -> ProjectionDiff:
    """Compare every table of ``live`` with a replay of ``log`` into an in-memory database."""
    fresh = DuckProjection(None)
    try:
        rebuild_projection(log, fresh)
        want = fresh.dump()
    finally:
        fresh.close()
    have = live.dump()
    report = ProjectionDiff(events=log.last_seq)
    for table in TABLES:
        w, h = set(want[table]), set(have[table])
        missing, extra = w - h, h - w
        if missing or extra or len(want[table]) != len(have[table]):
            report.tables[table] = (len(missing), len(extra))
            for row in sorted(missing, key=repr)[:max_examples]:
                report.examples.append(f"{table}: missing {row!r}")
            for row in sorted(extra, key=repr)[:max_examples]:
                report.examples.append(f"{table}: unexpected {row!r}")
    return report
