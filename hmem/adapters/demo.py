"""``hmem demo``: one fact about Maya, revised, questioned and forgotten, in about a minute.

Each step prints the equivalent CLI command, what hmem answered, and one line on what a plain
key-value store or a vector store could not have answered.
"""

from __future__ import annotations

import sys
import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TextIO

from hmem.adapters import cli_format as fmt
from hmem.memory import Memory

__all__ = ["run_demo", "StepClock"]

START = datetime(2026, 3, 10, 9, 0, tzinfo=timezone.utc)
STEP = timedelta(minutes=4)
QUERY = "where does maya live"


class StepClock:
    """A clock that starts at ``start`` and moves ``step`` forward each time it is read."""

    def __init__(self, start: datetime = START, step: timedelta = STEP) -> None:
        self.now = start
        self.step = step

    def __call__(self) -> datetime:
        self.now += self.step
        return self.now


def run_demo(path: Path | None, out: TextIO | None = None) -> int:
    """Run the scenario in the store at ``path`` (default: a temporary one). Returns 0."""
    out = out or sys.stdout
    if path is not None:
        _scenario(Path(path), out, temporary=False)
        return 0
    with tempfile.TemporaryDirectory(prefix="hmem-demo-") as tmp:
        _scenario(Path(tmp), out, temporary=True)
    return 0


def _scenario(path: Path, out: TextIO, *, temporary: bool) -> None:
    def say(*lines: str) -> None:
        for line in lines:
            print(line, file=out)

    def step(n: int, heading: str, command: str) -> None:
        say(f"{n}. {heading}", f"   $ hmem {command}")

    def show(lines: list[str]) -> None:
        say(*(f"   {line}" for line in lines))

    def note(text: str) -> None:
        say(f"   > {text}")

    clock = StepClock()
    keep = "temporary, deleted at the end" if temporary else "kept"
    say("hmem demo: one fact about Maya, revised, questioned and forgotten",
        f"store: {path} ({keep})",
        f"clock: starts {fmt.tx(START)}, +4 minutes per step")

    with Memory(path, clock=clock, embed_mode="inline") as m:  # seqs and clock steps as shown
        step(1, "Remember where Maya lives", 'remember maya "Maya lives in London" '
             "--valid-from 2025-01-01 --source-agent chat --source-ref s1:t3")
        a = m.remember("maya", "Maya lives in London", valid_from="2025-01-01",
                       source_agent="chat", source_ref="s1:t3")
        before = m.last_seq
        show([f"{fmt.fact_id(a)}  (log seq {before}, recorded {fmt.tx(clock.now)})"])
        note("a key-value store keeps a value, not when it became true, when we learned it "
             "or who said it")

        step(2, "She moves: revise, never overwrite",
             f'revise {a} "Maya lives in Paris" --valid-from 2026-03-01 --source-ref s9:t2')
        b = m.revise(a, "Maya lives in Paris", valid_from="2026-03-01", source_ref="s9:t2")
        after = m.last_seq
        show([f"{fmt.fact_id(b)}  (log seq {after}, recorded {fmt.tx(clock.now)})"])
        note("a key-value store now holds only Paris: London was overwritten and is gone")

        step(3, "Recall now", f'recall "{QUERY}"')
        show(fmt.recall_lines(m.recall(QUERY)))
        note("a vector store returns London and Paris alike, with no idea which is current")

        then = fmt.tx(m.tx_time(before))[11:16]
        step(4, f"Recall as of seq {before}: what did we believe at {then}?",
             f'recall "{QUERY}" --as-of {before}')
        show(fmt.recall_lines(m.recall(QUERY, as_of=before)))
        note("neither can say what was believed at an earlier moment, e.g. last Tuesday")

        step(5, "Recall valid at 2025-06-01: where did she live then?",
             f'recall "{QUERY}" --valid-at 2025-06-01')
        show(fmt.recall_lines(m.recall(QUERY, valid_at="2025-06-01")))
        note("neither knows when a fact was true in the world, only that it was stored")

        step(6, "What changed between the two points?", f"diff {before} {after}")
        show(fmt.diff_lines(m.diff(before, after)))
        note("neither can list what changed between two moments")

        step(7, f"Why do we believe {fmt.fact_id(b)}?", f"why {b}")
        show(fmt.why_lines(m.why(b)))
        note("neither can say where a belief came from or what it replaced")

        step(8, "The user asks us to forget it", f'forget {b} --reason "user asked"')
        seq = m.forget(b, reason="user asked")
        show([f"forgot {fmt.fact_id(b)} (log seq {seq})"])
        note("a delete erases the record; here the fact leaves recall but stays auditable")

        step(9, "Recall again", f'recall "{QUERY}"')
        show(fmt.recall_lines(m.recall(QUERY)))
        note("a key-value store cannot tell 'never known' from 'forgotten'; history can")

        step(10, "The whole story of maya", "history maya")
        show(fmt.history_lines("maya", m.history("maya")))
        note("neither keeps every version, when it was believed, and why it ended")
