"""What each ``hmem`` command does: open the store, call one library method, print.

The parser (:mod:`hmem.adapters.cli`) maps each command to one ``cmd_*`` function here, and
checks arguments with the ``arg_*`` types. Library errors propagate to
:func:`hmem.adapters.cli.main`, which prints them as one line. Every line for a person goes
out through :func:`say`, which shows stored text's control characters as escapes (``--json``
is JSON, escaped by its encoder).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from hmem.adapters import cli_format as fmt
from hmem.args import fact_id
from hmem.errors import InvalidInput, shown
from hmem.views import plain_int

if TYPE_CHECKING:
    from hmem.memory import Memory


# ---------------------------------------------------------------------------- helpers


def say(line: str, *, err: bool = False) -> None:
    """Print one line for a person (on stderr with ``err``): whatever stored or user-given text
    it carries, control characters show as escapes (:func:`hmem.adapters.cli_format.visible`)."""
    print(fmt.visible(line), file=sys.stderr if err else sys.stdout)


def fail(message: str) -> int:
    """Print one ``error: ...`` line on stderr; returns the exit code 1."""
    say("error: " + " ".join(message.splitlines()), err=True)
    return 1


def _root(args: argparse.Namespace) -> Path | str:
    from hmem.storage.targets import (
        store_target,  # lazy, like every heavy import: `hmem --help` stays fast
    )

    return store_target(args.path)


def _dir(args: argparse.Namespace) -> Path:
    """The directory of the store's local files: its own, or a server store's cache on this
    host (where ``hmem mcp --usage-log`` writes)."""
    from hmem.storage.targets import local_directory

    return local_directory(args.path)


@contextmanager
def open_memory(
    args: argparse.Namespace, *, read_only: bool, log_recalls: bool | None = None
) -> Iterator[Memory]:
    from hmem.memory import Memory

    mem = Memory(_root(args), namespace=args.namespace, read_only=read_only, fsync=args.fsync,
                 embedder=args.embedder, log_recalls=log_recalls,
                 memory_mb=getattr(args, "memory_mb", None),
                 shared=not read_only)  # one of many writers (MCP servers, CLI commands)
    try:
        for note in mem.notes:
            say(f"note: {note}", err=True)
        if read_only:
            _note_emptyarg_namespace(mem)
        yield mem
    finally:
        mem.close()


def _note_emptyarg_namespace(mem: Memory) -> None:
    """A read of a namespace that holds nothing is most likely a typo: say so (without naming
    other namespaces: their names are theirs)."""
    if mem.stats().namespace_events:
        return
    say(f"note: namespace {shown(mem.namespace)} holds nothing yet (choose another with "
        f"--namespace)", err=True)


def _emit(args: argparse.Namespace, value: Any, lines: list[str]) -> None:
    """Print ``value`` as one JSON document with --json, else the human ``lines``."""
    if args.json:
        sys.stdout.write(fmt.json_visible(msgspec.json.encode(value, enc_hook=plain_int).decode())
                         + "\n")
    else:
        for line in lines:
            say(line)


MAX_DIGITS = 19  # a seq or fact id is a signed 64-bit number


def tx_point(value: str | None) -> int | str | None:
    """A transaction point from the command line: digits are a seq, anything else a time."""
    if value is None:
        return None
    text = value.strip()
    if not (text.isascii() and text.isdigit()):
        return value
    if len(text) > MAX_DIGITS:
        raise InvalidInput(f"seq {shown(text)} is too large; `hmem stats` shows the last seq")
    return int(text)


def arg_fact_id(value: str) -> int:
    try:
        return fact_id(value)
    except InvalidInput as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def arg_namespace(value: str) -> str:
    # Checked here too: Memory() rejects an empty namespace only after taking the writer lock.
    if not value.strip():
        raise argparse.ArgumentTypeError("a namespace is a non-empty name, e.g. 'default'")
    return value


def arg_file_path(value: str) -> str:
    """A path argument: non-empty and without NUL bytes (which no file name can hold)."""
    if not value.strip():
        raise argparse.ArgumentTypeError("a path is a non-empty file or directory name")
    if "\x00" in value:
        raise argparse.ArgumentTypeError(f"a path cannot contain a NUL byte: {shown(value)}")
    return value


def arg_positive(value: str) -> int:
    text = value.strip()
    if not (text.isascii() and text.lstrip("+-").isdigit()) or len(text) > MAX_DIGITS:
        raise argparse.ArgumentTypeError(
            f"expected a whole number (at most {MAX_DIGITS} digits), not {shown(value)}")
    n = int(text)
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a number of at least 1, not {n}")
    return n


# ---------------------------------------------------------------------------- fact commands


def cmd_remember(args: argparse.Namespace) -> int:
    with open_memory(args, read_only=False) as m:
        new = m.remember(
            args.subject, args.text, valid_from=args.valid_from, valid_to=args.valid_to,
            confidence=args.confidence, entities=args.entity or (),
            source_agent=args.source_agent, source_ref=args.source_ref,
            dedup=not args.no_dedup, request_id=args.request_id,
        )
    _emit(args, {"id": int(new), "repeat": not new.new, "outcome": new.outcome}, [
        f"{fmt.fact_id(new)} (already remembered: this --request-id was written before)"
        if new.outcome == "retry" else
        f"{fmt.fact_id(new)} (already remembered: same subject and text, still believed; "
        "--no-dedup stores it again)" if new.outcome == "repeat" else fmt.fact_id(new)
    ])
    return 0


def cmd_revise(args: argparse.Namespace) -> int:
    with open_memory(args, read_only=False) as m:
        new = m.revise(
            args.id, args.text, valid_from=args.valid_from, valid_to=args.valid_to,
            subject=args.subject, confidence=args.confidence, entities=args.entity or (),
            reason=args.reason, source_agent=args.source_agent, source_ref=args.source_ref,
            request_id=args.request_id,
        )
    _emit(args, {"id": new, "revises": args.id, "outcome": new.outcome}, [
        f"{fmt.fact_id(new)} (this --request-id was written before)"
        if new.outcome == "retry" else fmt.fact_id(new)
    ])
    return 0


def cmd_forget(args: argparse.Namespace) -> int:
    with open_memory(args, read_only=False) as m:
        seq = m.forget(args.id, reason=args.reason, source_agent=args.source_agent,
                       source_ref=args.source_ref, request_id=args.request_id)
    again = " (this --request-id was written before)" if seq.outcome == "retry" else ""
    _emit(args, {"id": args.id, "seq": seq, "outcome": seq.outcome},
          [f"forgot {fmt.fact_id(args.id)} (log seq {seq}){again}"])
    return 0


def cmd_recall(args: argparse.Namespace) -> int:
    if args.source_ref is not None and not args.log:
        raise InvalidInput("--source-ref names who asked a logged recall: add --log")
    with open_memory(args, read_only=not args.log, log_recalls=args.log or None) as m:
        result = m.recall(
            args.query, limit=args.limit, max_tokens=args.max_tokens,
            as_of=tx_point(args.as_of), valid_at=args.valid_at, subject=args.subject,
            explain=args.explain, source_agent="cli" if args.log else None,
            source_ref=args.source_ref,
        )
    lines = fmt.recall_lines(result)
    if args.explain:
        lines += [f"  #{h.id}: " + ", ".join(f"{k} {v:g}" for k, v in (h.explain or {}).items())
                  for h in result.hits]
    _emit(args, result, lines)
    return 0


def cmd_reembed(args: argparse.Namespace) -> int:
    from hmem.adapters.progress import progress_bar

    with open_memory(args, read_only=False) as m, \
            progress_bar("embedded", "facts", quiet=args.quiet) as progress:
        n = m.reembed(progress=progress)
        model = m.embedder.model if m.embedder else None
    _emit(args, {"embedded": n, "model": model},
          [f"recorded {n} vectors from {model} in namespace {args.namespace}"])
    return 0


def cmd_why(args: argparse.Namespace) -> int:
    with open_memory(args, read_only=True) as m:
        why = m.why(args.id)
    _emit(args, why, fmt.why_lines(why))
    return 0


def cmd_beliefs(args: argparse.Namespace) -> int:
    point = tx_point(args.as_of)
    with open_memory(args, read_only=True) as m:
        beliefs = m.beliefs(point, valid_at=args.valid_at)
        why = None if beliefs or point is None else _before_first(m, args.as_of, point)
    if why is not None and args.json:
        say(why, err=True)  # stdout stays the JSON list
    _emit(args, beliefs, fmt.belief_lines(beliefs) if why is None else [why])
    return 0


def _before_first(m: Memory, given: str, point: int | str) -> str | None:
    """Why ``beliefs`` at ``point`` is empty when the reason is that the namespace had no event
    yet then (the library answers ``[]``: nothing was believed)."""
    if m.events(until=point).limit(1).fetchall():
        return None  # events by then, all forgotten or not valid at valid_at: the list says it
    first = m.stats().first_tx
    if first is None:
        return f"no beliefs: namespace {m.namespace!r} holds no events yet"
    return (f"no beliefs: as_of {given} is before the first event of namespace "
            f"{m.namespace!r} ({fmt.tx(first)})")


def cmd_recalls(args: argparse.Namespace) -> int:
    with open_memory(args, read_only=True) as m:
        logged = m.recalls(tx_point(args.since), tx_point(args.until), source_ref=args.source_ref)
    _emit(args, logged, fmt.recalls_lines(logged))
    return 0


def cmd_replay_recall(args: argparse.Namespace) -> int:
    with open_memory(args, read_only=True) as m:
        replay = m.replay_recall(args.seq)
    _emit(args, replay, fmt.replay_lines(replay))
    return 0 if replay.same else 1


def cmd_diff(args: argparse.Namespace) -> int:
    with open_memory(args, read_only=True) as m:
        since = tx_point(args.since)
        assert since is not None  # a required argument
        diff = m.diff(since, tx_point(args.until))
    _emit(args, diff, fmt.diff_lines(diff))
    return 0


def cmd_history(args: argparse.Namespace) -> int:
    with open_memory(args, read_only=True) as m:
        facts = m.history(args.subject)
    _emit(args, facts, fmt.history_lines(args.subject, facts))
    return 0


def cmd_consolidate(args: argparse.Namespace) -> int:
    writes = args.apply or bool(args.accept)
    with open_memory(args, read_only=not writes) as m:
        report = m.consolidate(apply=args.apply, accept=args.accept or (),
                               similarity=args.similarity, stale_days=args.stale_days)
    _emit(args, report, report.lines())
    return 0


def cmd_erase(args: argparse.Namespace) -> int:
    with open_memory(args, read_only=False) as m:
        receipt = m.erase(
            fact=args.fact, subject=args.subject, episode=args.episode, session=args.session,
            namespace=args.whole, reason=args.reason, by=args.by, dry_run=not args.yes,
        )
    _emit(args, receipt, receipt.lines())
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    if args.usage:
        from hmem.adapters.usage import summarize_usage, usage_lines

        summary = summarize_usage(_dir(args))
        _emit(args, summary, usage_lines(summary))
        return 0
    with open_memory(args, read_only=True) as m:
        stats = m.stats()
    _emit(args, stats, fmt.stats_lines(stats))
    return 0


def cmd_mcp(args: argparse.Namespace) -> int:
    from hmem.adapters.usage import usage_enabled

    try:
        from hmem.adapters.mcp_tools import serve
    except ImportError as e:
        return fail(str(e))
    log_recalls = True if args.log_recalls else None  # else $HMEM_LOG_RECALLS decides
    if args.log_recalls and args.read_only:
        raise InvalidInput("--log-recalls needs the writer: drop --read-only (a read-only "
                           "server cannot append the recall events)")
    with open_memory(args, read_only=args.read_only, log_recalls=log_recalls) as m:
        serve(m, usage_log=usage_enabled(args.usage_log), source_agent=args.source_agent)
    return 0


# ---------------------------------------------------------------------------- log and replay


def cmd_log_verify(args: argparse.Namespace) -> int:
    from eventlog.segments import ChainHead
    from eventlog.witness import load_key
    from hmem.storage.targets import verify_log_at

    if (args.key is None) != (args.witness is None):
        raise InvalidInput("--key and --witness go together: the key checks the witness file")
    try:
        expect = None if args.expect is None else ChainHead.parse(args.expect)
    except ValueError as e:
        raise InvalidInput(str(e)) from None
    key = None if args.key is None else load_key(args.key)
    report = verify_log_at(args.path, expect=expect, key=key, witness=args.witness)
    _emit(args, report, fmt.log_verify_lines(report, _root(args)))
    return 0 if report.ok else 1


def cmd_log_repair(args: argparse.Namespace) -> int:
    from hmem.storage.targets import repair_log_at

    report = repair_log_at(args.path)
    _emit(args, report, fmt.log_repair_lines(report))
    return 0


def cmd_log_show(args: argparse.Namespace) -> int:
    from hmem.storage.targets import open_backend

    events: list[Any] = []
    more = False
    backend = open_backend(_root(args), read_only=True, shared=False)  # any backend's Log
    try:
        for ev in backend.log.read(args.from_seq):  # this namespace's events only
            if ev.namespace != args.namespace:
                continue
            if len(events) == args.limit:
                more = True
                break
            events.append(ev)
    finally:
        backend.close()
    _emit(args, events, [fmt.event_line(ev) for ev in events])
    if not args.json and more:
        say(f"(more follow; continue with --from {events[-1].seq + 1})", err=True)
    return 0


def cmd_log_checkpoint(args: argparse.Namespace) -> int:
    from eventlog.witness import load_key, record
    from hmem.storage.targets import open_backend

    key = load_key(args.key)
    backend = open_backend(_root(args), read_only=True, shared=False)  # any backend's Log
    try:
        checkpoint = record(backend.log, key, args.witness)
    finally:
        backend.close()
    _emit(args, checkpoint, [
        f"signed head {checkpoint.seq}:{checkpoint.hash} at {checkpoint.at}",
        f"appended to {args.witness}; check later with `hmem log verify --key {args.key} "
        f"--witness {args.witness}`",
    ])
    return 0


def cmd_log_keygen(args: argparse.Namespace) -> int:
    from eventlog.witness import new_key

    path = new_key(args.file)
    _emit(args, {"key": str(path)}, [
        f"new key in {path} (mode 0600); keep it outside the store, e.g. on another machine",
    ])
    return 0


def cmd_replay_rebuild(args: argparse.Namespace) -> int:
    from hmem.adapters.progress import progress_bar

    with open_memory(args, read_only=False) as m, \
            progress_bar("replayed", "events", quiet=args.quiet) as progress:
        n = m.rebuild(progress)
    _emit(args, {"events": n}, [f"rebuilt the projection from {n} events"])
    return 0


def cmd_replay_verify(args: argparse.Namespace) -> int:
    with open_memory(args, read_only=False) as m:
        report = m.verify()
    lines = fmt.projection_diff_lines(report)
    value = {"ok": report.ok, "events": report.events, "tables": report.tables,
             "examples": report.examples, "notes": report.notes}
    _emit(args, value, lines)
    return 0 if report.ok else 1


def cmd_copy(args: argparse.Namespace) -> int:
    from hmem.adapters.progress import progress_bar
    from hmem.storage.copy import copy_store

    with progress_bar("copied", "events", quiet=getattr(args, "quiet", False)) as progress:
        done = copy_store(args.source, args.destination, key_file=args.key_file,
                          progress=progress)
    chain = "the same chain as the source" if done.same_chain else "its own chain (sealed "
    chain += "" if done.same_chain else "differently), every event equal to the source's"
    _emit(args, done, [f"copied {done.events:,} events to {done.destination} in "
                       f"{done.seconds:.1f} s; head {done.head}, {chain}"])
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from hmem.adapters.progress import progress_bar
    from hmem.notebook.export import export_jsonl, export_parquet

    if args.jsonl is not None:
        with open_memory(args, read_only=True) as m:
            done = export_jsonl(m, sys.stdout if args.jsonl == "-" else Path(args.jsonl))
        if args.jsonl != "-":
            _emit(args, done, [f"exported {done.events} events of namespace {done.namespace} "
                               f"(log seq {done.seq}) to {done.path}"])
        return 0
    with open_memory(args, read_only=True) as m, \
            progress_bar("exported", "files", quiet=args.quiet) as progress:
        result = export_parquet(m, Path(args.parquet).expanduser(), progress=progress)
    lines = [f"exported namespace {result.namespace} (log seq {result.seq}) to "
             f"{result.directory}:"]
    lines += [f"  {Path(t.path).name:<22} {t.rows} rows" for t in result.tables.values()]
    _emit(args, result, lines)
    return 0


def cmd_timeline(args: argparse.Namespace) -> int:
    from hmem.notebook.timeline import plot_timeline, timeline_rows

    out = Path(args.out).expanduser()
    with open_memory(args, read_only=True) as m:
        rows = timeline_rows(m, args.subject)
        plot_timeline(m, args.subject, out)
    _emit(args, {"out": str(out), "subjects": args.subject, "rows": rows},
          [f"wrote {out} ({len(rows)} facts about {', '.join(args.subject)})"])
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from hmem.adapters.demo import run_demo

    return run_demo(Path(args.path).expanduser() if args.path else None)


