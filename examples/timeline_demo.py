"""Draw the belief timeline of the README (docs/timeline.png) from a small scripted history.

    pip install -e '.[plot]' && python examples/timeline_demo.py docs/timeline.png

Maya moves from London to Paris (a change in the world), her job title is corrected, a fact is
forgotten on request, and a second subject (Tom) changes office: over a week of simulated clock.
"""

from __future__ import annotations

import sys
import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

from hmem import Memory
from hmem.notebook.timeline import plot_timeline


class DayClock:
    """A settable clock: ``clock.at(day, hour)`` moves it to that day of the scripted week."""

    def __init__(self, start: datetime) -> None:
        self.start = self.now = start

    def at(self, day: int, hour: int = 9) -> None:
        self.now = self.start + timedelta(days=day, hours=hour)

    def __call__(self) -> datetime:
        return self.now


def build(m: Memory, clock: DayClock) -> None:
    clock.at(0)
    london = m.remember("maya", "Maya lives in London", valid_from="2025-01-01",
                        source_agent="chat", source_ref="s1:t3")
    job = m.remember("maya", "Maya works at Acme as a designer", valid_from="2024-06-01",
                     source_agent="chat", source_ref="s1:t7")
    clock.at(0, 15)
    veg = m.remember("maya", "Maya is vegetarian", valid_from="2025-09-01",
                     source_agent="planner", source_ref="menu:2")
    tom = m.remember("tom", "Tom runs the Lisbon office", valid_from="2024-09-01",
                     source_agent="planner", source_ref="org:1")
    clock.at(2)
    m.revise(job, "Maya works at Acme as a product manager", reason="misheard her role",
             source_ref="s2:t4")
    clock.at(3, 11)
    m.revise(london, "Maya lives in Paris", valid_from="2026-03-01", source_ref="s3:t2")
    clock.at(4)
    m.revise(tom, "Tom runs the Berlin office", valid_from="2026-02-15", source_ref="org:5")
    clock.at(5, 16)
    m.forget(veg, reason="user asked")


def main(argv: list[str]) -> int:
    out = Path(argv[0] if argv else "timeline.png")
    with tempfile.TemporaryDirectory(prefix="hmem-timeline-") as tmp:
        clock = DayClock(datetime(2026, 3, 2, tzinfo=timezone.utc))
        with Memory(Path(tmp) / "store", clock=clock, embedder=None) as m:
            build(m, clock)
            plot_timeline(m, ["maya", "tom"], out)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
