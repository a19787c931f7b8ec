"""Crash torture: SIGKILL a writer at random moments; the store must lose nothing acknowledged.

    python -m tests.trust.torture.crash --kills 1000 --out /tmp/torture.json   # the full run
    python -m tests.trust.torture.crash --kills 20 --seed 7                    # a short run

The full run is documented in the README (Guarantees).

A long run starts a fresh store every ``--fresh-every`` kills (default 100): the checks after
each kill read the whole log, so one ever-growing store would make round ``n`` cost O(n).
Progress (and any problem, as it is found) goes to stderr; the JSON report to stdout and
``--out`` (rewritten after every fresh store, so a long run that is stopped keeps its figures).

A writer subprocess does random remember / revise / forget / record_embedding calls with
``fsync="always"``. Before each call it prints an *intent* line, after the call returns an
*ack* line with the seqs it was given. The parent kills it with SIGKILL at a random moment, then
checks the store:

* every acknowledged event is in the log, with the content the writer acknowledged;
* nothing else is: events after the last ack can only be those of the one call in flight;
* the projection equals a replay of the log (``Memory.verify``);
* the store accepts writes again (the parent writes one fact and closes).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

WORDS = "maya tom paris london tea jazz chess works lives likes moved bought".split()


def digest(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


# ---------------------------------------------------------------------------------- writer


def writer(path: str, seed: int) -> None:
    """Runs in the subprocess: random writes forever, announcing each before and after."""
    from hmem import Memory
    from hmem.embedders import HashEmbedder

    rng = random.Random(seed)
    out = sys.stdout
    flush_every = rng.choice([1, 7, 64])
    # Inline embedding: each call's events (a fact and its vector) are the seqs it acks.
    with Memory(path, fsync="always", embedder=HashEmbedder(8), flush_every=flush_every,
                embed_mode="inline") as m:
        live = [f.id for f in _current(m)]
        while True:
            words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 8)))
            text = words + f" {rng.random()}"
            r = rng.random()
            if r < 0.55 or not live:
                op, target = "remember", None
            elif r < 0.75:
                op, target = "revise", rng.choice(live)
            elif r < 0.85:
                op, target = "forget", rng.choice(live)
            else:
                op, target = "embed", rng.choice(live)
            out.write(json.dumps({"intent": op, "target": target, "text": digest(text)}) + "\n")
            out.flush()
            before = m.last_seq
            if op == "remember":
                fid = m.remember("s", text, source_ref=f"torture:{seed}")
                live.append(fid)
            elif op == "revise":
                world = datetime.now(timezone.utc) + timedelta(days=1)  # later than any before
                fid = m.revise(target, text, valid_from=None if rng.random() < 0.5 else world)
                live.remove(target)
                live.append(fid)
            elif op == "forget":
                m.forget(target, reason="torture")
                live.remove(target)
            else:
                m.record_embedding(target, "extra-model", [rng.random() for _ in range(4)])
            seqs = list(range(before + 1, m.last_seq + 1))
            ack = {"ack": op, "target": target, "text": digest(text), "seqs": seqs}
            out.write(json.dumps(ack) + "\n")
            out.flush()


def _current(m):  # type: ignore[no-untyped-def]
    state = m.store.projector.space(m.namespace).state
    return [f for f in state.facts.values() if f.superseded_by is None and f.forgotten_seq is None]


# ---------------------------------------------------------------------------------- parent


@dataclass
class Report:
    kills: int = 0
    acked_events: int = 0
    in_flight_found: int = 0
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)


def run(path: Path, kills: int, seed: int, max_wait: float = 0.25, fresh_every: int = 0,
        progress: bool = False, max_seconds: float | None = None,
        on_epoch: Callable[[Report], None] | None = None) -> Report:
    """``kills`` rounds of: start the writer, kill it at a random moment, check the store.

    With ``fresh_every`` > 0 the rounds use a new store (``path``/``store-<k>``) every
    ``fresh_every`` kills, which keeps the cost of each check bounded in a long run;
    ``on_epoch(report)`` is called before each new store. A run stops early, after a whole
    round, once ``max_seconds`` have passed.
    """
    rng = random.Random(seed)
    report = Report()
    acked: dict[int, dict] = {}  # seq -> the ack that covers it
    start = time.perf_counter()
    env = {**os.environ, "HMEM_EMBEDDER": "none", "PYTHONHASHSEED": "0"}
    base = path
    for round_no in range(kills):
        if max_seconds is not None and time.perf_counter() - start > max_seconds:
            break
        if fresh_every and round_no % fresh_every == 0:
            report.acked_events += len(acked)
            acked = {}
            path = base / f"store-{round_no // fresh_every}"
            report.seconds = time.perf_counter() - start
            if on_epoch is not None and round_no:
                on_epoch(report)
            if progress and round_no:
                print(f"{round_no} kills, {report.acked_events} acked, "
                      f"{len(report.problems)} problems, "
                      f"{time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.trust.torture.crash", "--writer", str(path),
             "--seed", str(rng.randrange(2**31))],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
            cwd=Path(__file__).resolve().parents[3],
        )
        chunks: list[bytes] = []
        assert proc.stdout is not None
        first = proc.stdout.readline()  # the writer is up: its first intent
        chunks.append(first)
        reader = threading.Thread(
            target=lambda out=proc.stdout, into=chunks: into.extend(
                iter(lambda: out.read1(65536), b"")
            )
        )
        reader.start()
        time.sleep(rng.uniform(0.0, max_wait))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        reader.join()
        err = proc.stderr.read() if proc.stderr else b""
        report.kills += 1
        lines = b"".join(chunks).decode(errors="replace").split("\n")
        complete = [json.loads(line) for line in lines[:-1] if line]  # the last may be torn
        intent = None
        for msg in complete:
            if "intent" in msg:
                intent = msg
            else:
                for s in msg["seqs"]:
                    acked[s] = msg
                intent = None
        if proc.returncode != -signal.SIGKILL and proc.returncode is not None:
            report.problems.append(
                f"round {round_no}: writer exited {proc.returncode}: {err[-500:]!r}"
            )
        seen = len(report.problems)
        check(path, acked, intent, report, round_no)
        if progress:
            for problem in report.problems[seen:]:
                print(f"PROBLEM {problem}", file=sys.stderr, flush=True)
    report.acked_events += len(acked)
    report.seconds = time.perf_counter() - start
    return report


def check(path: Path, acked: dict[int, dict], intent: dict | None, report: Report,
          round_no: int) -> None:
    from eventlog.events import FactForgotten, FactRemembered, FactRevised
    from hmem import Memory

    with Memory(path, embedder="none") as m:
        log = m.store.log
        last_acked = max(acked, default=0)
        if log.last_seq < last_acked:
            report.problems.append(
                f"round {round_no}: log ends at {log.last_seq}, acked {last_acked}"
            )
            return
        for seq, ack in acked.items():
            ev = log.get(seq)
            kind = {"remember": FactRemembered, "revise": FactRevised, "forget": FactForgotten}
            expected = kind.get(ack["intent"] if "intent" in ack else ack["ack"])
            if isinstance(ev, (FactRemembered, FactRevised)) and digest(ev.text) != ack["text"]:
                report.problems.append(f"round {round_no}: seq {seq} text differs from the ack")
            if expected is not None and seq == ack["seqs"][0] and not isinstance(ev, expected):
                report.problems.append(f"round {round_no}: seq {seq} is {type(ev).__name__}")
        extra = list(log.read(last_acked + 1))
        if extra:
            if intent is None or len(extra) > 2:
                report.problems.append(
                    f"round {round_no}: {len(extra)} unacknowledged events with no call in flight"
                )
            else:
                report.in_flight_found += 1
                for s in range(last_acked + 1, log.last_seq + 1):
                    acked[s] = {"ack": intent["intent"], "text": intent["text"],
                                "seqs": list(range(last_acked + 1, log.last_seq + 1))}
        if not m.verify().ok:
            report.problems.append(f"round {round_no}: projection differs from a replay")
        before = m.last_seq
        m.remember("s", f"parent write after round {round_no}")
        acked[before + 1] = {"ack": "remember",
                             "text": digest(f"parent write after round {round_no}"),
                             "seqs": [before + 1]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--path", type=Path, help="store directory (default: a temporary one)")
    parser.add_argument("--fresh-every", type=int, default=100, metavar="N",
                        help="start a fresh store every N kills (0: one store for the whole run)")
    parser.add_argument("--out", type=Path,
                        help="write the JSON report here too (also after every fresh store)")
    parser.add_argument("--max-seconds", type=float, metavar="S",
                        help="stop after the round that passes S seconds (a bounded long run)")
    parser.add_argument("--writer", metavar="PATH", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.writer:
        writer(args.writer, args.seed)
        return 0
    with tempfile.TemporaryDirectory(prefix="hmem-torture-") as tmp:
        path = args.path or Path(tmp) / "store"
        command = " ".join(["python -m tests.trust.torture.crash", *(argv or sys.argv[1:])])

        def save(report: Report, done: bool = False) -> str:
            text = json.dumps({"command": command, "finished": done, **report.__dict__}, indent=2)
            if args.out:
                tmp = args.out.with_name(args.out.name + ".tmp")
                tmp.write_text(text + "\n")
                os.replace(tmp, args.out)
            return text

        report = run(path, args.kills, args.seed, fresh_every=args.fresh_every, progress=True,
                     max_seconds=args.max_seconds, on_epoch=save)
    print(save(report, done=True))
    return 1 if report.problems else 0


if __name__ == "__main__":
    sys.exit(main())
