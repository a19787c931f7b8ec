"""The longitudinal benchmark: facts that change over time, four memories side by side.

    python -m bench.longitudinal                        # 40 people, seed 1 (longitudinal-v1)
    python -m bench.longitudinal --people 5 --seed 7 --out bench/out/longitudinal.json
    python -m bench.longitudinal --errors hmem          # also list what hmem got wrong

The data (``bench.longitudinal_data``): generated agent histories (moves, jobs, preferences,
pets; changes, corrections, retractions) with questions on what is true now (``now``), what
was true at a date (``valid_at``), what was believed at a moment (``believed_at``), what
changed between two moments (``changed_between``) and where a belief came from (``source``),
each with an exact answer from the generator's reference model.

The systems (``bench.longitudinal_systems``): hmem, plain markdown notes searched by grep, an
overwrite store (update in place, as Mem0 does) and SQLite + FTS5, each fed the same statements
in transaction-time order and asked every question after the whole history. One rule-based
extractor reads every system's retrieved text. Scoring is exact: casefolded, stripped strings
equal; ``changed_between`` compared as sets; None is right only where the truth is None. No
LLM, no network, no embedder. (An LLM-judged variant, answering free-form questions from each
system's retrieved context, could go through ``bench.answer``'s loop when an endpoint is
configured; it is not implemented here.)

The report: accuracy per question kind and system (and n), overall (every question counted
once); the same per probe (how the time of a ``valid_at`` / ``believed_at`` question was picked:
at random or on a trap); ingest seconds and mean answer milliseconds per system. Durability is
each system's default: hmem fsyncs every write, SQLite commits each statement
(synchronous=FULL), the notes file and the dict are never synced, so ingest times compare
durability as much as speed.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from bench.longitudinal_data import (
    QUESTION_KINDS,
    Answer,
    Dataset,
    Question,
    digest,
    generate,
)
from bench.longitudinal_systems import SYSTEMS, answer, make_system

PROBED = ("valid_at", "believed_at")  # the kinds whose times are partly set on traps

__all__ = ["SystemResult", "correct", "main", "markdown", "run", "run_system"]


def _norm(a: Answer) -> str | frozenset[str] | None:
    if a is None:
        return None
    if isinstance(a, list):
        return frozenset(x.casefold().strip() for x in a)
    return a.casefold().strip()


def correct(got: Answer, truth: Answer) -> bool:
    """Exact match after casefold and strip; lists as sets; None only for None."""
    return _norm(got) == _norm(truth)


@dataclass
class SystemResult:
    name: str
    ingest_s: float = 0.0
    answer_s: float = 0.0
    answers: dict[str, Answer] = field(default_factory=dict)  # question id -> answer
    right: dict[str, bool] = field(default_factory=dict)

    def score(self, questions: list[Question], kind: str | None = None) -> tuple[int, int]:
        """(correct, asked) over questions of ``kind`` (None: every question)."""
        chosen = [q for q in questions if kind is None or q.kind == kind]
        return sum(self.right[q.id] for q in chosen), len(chosen)


def run_system(name: str, data: Dataset, root: Path) -> SystemResult:
    """Ingest ``data`` into a fresh ``name`` system under ``root`` and ask every question."""
    result = SystemResult(name)
    system = make_system(name, root)
    try:
        t0 = time.perf_counter()
        for st in data.statements:
            system.ingest(st)
        system.finish(data.statements[-1].tx + timedelta(hours=1))
        t1 = time.perf_counter()
        for q in data.questions:
            got = answer(system, q)
            result.answers[q.id] = got
            result.right[q.id] = correct(got, q.answer)
        t2 = time.perf_counter()
    finally:
        system.close()
    result.ingest_s, result.answer_s = t1 - t0, t2 - t1
    return result


def run(data: Dataset, systems: list[str] | None = None,
        root: Path | None = None) -> list[SystemResult]:
    """Every system of ``systems`` (default all) over ``data``, each in its own directory
    under ``root`` (default a temporary directory, removed after)."""
    if root is None:
        with tempfile.TemporaryDirectory(prefix="hmem-longitudinal-") as tmp:
            return run(data, systems, Path(tmp))
    out = []
    for name in list(SYSTEMS) if systems is None else systems:
        where = root / name.replace(" ", "-")
        where.mkdir(parents=True)
        out.append(run_system(name, data, where))
    return out


def _pct(right: int, n: int) -> str:
    return f"{100 * right / n:.1f}%" if n else "-"


def _table(head: list[str], rows: list[list[str]]) -> list[str]:
    rule = ["---", *("---:" for _ in head[1:])]
    return ["| " + " | ".join(r) + " |" for r in [head, rule, *rows]]


def markdown(data: Dataset, results: list[SystemResult]) -> str:
    """The report: accuracy per question kind and overall; per probe (how a question's time
    was picked) for the kinds that have them; timings."""
    qs = data.questions
    names = [r.name for r in results]
    kinds = [[kind or "**overall**", str(sum(kind is None or q.kind == kind for q in qs)),
              *(_pct(*r.score(qs, kind)) for r in results)] for kind in [*QUESTION_KINDS, None]]
    probes = []
    for kind, probe in sorted({(q.kind, q.probe) for q in qs if q.kind in PROBED}):
        chosen = [q for q in qs if q.kind == kind and q.probe == probe]
        probes.append([f"{kind}: {probe}", str(len(chosen)),
                       *(_pct(*r.score(chosen)) for r in results)])
    times = [["ingest (s, all statements)", *(f"{r.ingest_s:.2f}" for r in results)],
             ["answer (ms per question)",
              *(f"{1000 * r.answer_s / max(1, len(qs)):.2f}" for r in results)]]
    return "\n".join([
        f"longitudinal benchmark: {data.version}, seed {data.seed}, {data.people} people, "
        f"{len(data.statements)} statements, {len(qs)} questions, digest {digest(data)[:16]}",
        "", *_table(["question kind", "n", *names], kinds),
        "", *_table(["probe", "n", *names], probes),
        "", *_table(["time", *names], times),
    ])


def errors(data: Dataset, result: SystemResult) -> list[str]:
    """One line per question ``result`` got wrong."""
    out = []
    for q in data.questions:
        if not result.right[q.id]:
            when = "" if q.at is None else f" at {q.at:%Y-%m-%d %H:%M}"
            when += "" if q.until is None else f" .. {q.until:%Y-%m-%d %H:%M}"
            out.append(f"{q.id} {q.kind} {q.subject} {q.attribute or ''}{when}: "
                       f"expected {q.answer!r}, got {result.answers[q.id]!r}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.longitudinal",
                                     description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--people", type=int, default=40, help="persons (default 40)")
    parser.add_argument("--seed", type=int, default=1, help="generator seed (default 1)")
    parser.add_argument("--systems", default=",".join(SYSTEMS),
                        help=f"comma-separated, from {', '.join(SYSTEMS)}")
    parser.add_argument("--out", type=Path, help="also write the results as JSON here")
    parser.add_argument("--errors", metavar="SYSTEM", action="append", default=[],
                        help="list the questions SYSTEM got wrong (repeatable)")
    args = parser.parse_args(argv)
    names = [s.strip() for s in args.systems.split(",") if s.strip()]
    unknown = [s for s in [*names, *args.errors] if s not in SYSTEMS]
    if unknown:
        parser.error(f"unknown systems {unknown}; choose from {list(SYSTEMS)}")
    data = generate(args.seed, args.people)
    results = run(data, names)
    print(markdown(data, results))
    for r in results:
        if r.name in args.errors:
            print(f"\n{r.name}: wrong answers")
            print("\n".join(errors(data, r)) or "(none)")
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({
            "version": data.version, "seed": data.seed, "people": data.people,
            "digest": digest(data), "statements": len(data.statements),
            "systems": {r.name: {
                "ingest_s": r.ingest_s, "answer_s": r.answer_s,
                "accuracy": {k or "overall": dict(zip(("correct", "n"), r.score(
                    data.questions, k), strict=True)) for k in [*QUESTION_KINDS, None]},
                "answers": r.answers,
            } for r in results},
        }, indent=1) + "\n")
        print(f"\nwrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
