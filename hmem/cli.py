"""The ``hmem`` command line: a thin adapter over :class:`hmem.memory.Memory`.

Each command opens the store, calls one library method, prints, and closes. Library errors
(:class:`hmem.errors.HmemError`) become one ``error: ...`` line on stderr and exit code 1; usage
errors exit 2. Read commands open the store read-only, so they work beside a live writer.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import msgspec

from eventlog.log import FSYNC_POLICIES
from hmem import __version__
from hmem import cli_format as fmt
from hmem.args import fact_id
from hmem.errors import HmemError, InvalidInput, shown

if TYPE_CHECKING:
    from hmem.memory import Memory

__all__ = ["main", "build_parser", "iter_parsers"]

DESCRIPTION = """\
hmem: memory for AI agents as a boring, trustworthy database.

Every change is an event in an append-only log: nothing is overwritten, so hmem can say what
is believed now, what was believed at any earlier time (--as-of), what was true in the world
at any time (--valid-at), and why (where a fact came from and what it replaced)."""

EPILOG = """\
First steps:
  hmem demo                      a one-minute tour in a temporary store
  hmem remember maya "Maya lives in London" --valid-from 2025-01-01
  hmem recall "where does maya live"

Times are ISO 8601 with a zone ('2025-01-01', '2025-01-01T09:30:00Z'); --as-of and diff also
take a log seq (e.g. 42). The store is --path, else $HMEM_HOME, else ~/.local/share/hmem.
Add --json to any command for one JSON document on stdout. `hmem COMMAND --help` for more."""


# ---------------------------------------------------------------------------- entry point


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the exit code (0 ok, 1 error, 2 usage error)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # --help, --version and usage errors
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
    handler: Callable[[argparse.Namespace], int] | None = getattr(args, "handler", None)
    if handler is None:  # `hmem` or `hmem log` without a subcommand
        getattr(args, "group_parser", parser).print_help()
        return 0
    try:
        return handler(args)
    except HmemError as e:
        return _fail(str(e) or type(e).__name__)
    except BrokenPipeError:  # e.g. `hmem log show | head`
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except OSError as e:  # e.g. permission denied on --path
        return _fail(f"{e.strerror or e}: {e.filename}" if e.filename else str(e))
    except KeyboardInterrupt:
        return 130


def _fail(message: str) -> int:
    print("error: " + " ".join(message.splitlines()), file=sys.stderr)
    return 1


# ---------------------------------------------------------------------------- helpers


def _root(args: argparse.Namespace) -> Path:
    from hmem.store import default_root  # lazy, like every heavy import: `hmem --help` stays fast

    return Path(args.path).expanduser() if args.path else default_root()


def _log_dir(args: argparse.Namespace) -> Path:
    from hmem.store import missing_store

    root = _root(args)
    if not (root / "log").is_dir():
        raise missing_store(root)
    return root / "log"


@contextmanager
def _memory(args: argparse.Namespace, *, read_only: bool) -> Iterator[Memory]:
    from hmem.memory import Memory

    mem = Memory(_root(args), namespace=args.namespace, read_only=read_only, fsync=args.fsync,
                 embedder=args.embedder)
    try:
        for note in mem.notes:
            print(f"note: {note}", file=sys.stderr)
        if read_only:
            _note_empty_namespace(mem)
        yield mem
    finally:
        mem.close()


def _note_empty_namespace(mem: Memory) -> None:
    """A read of a namespace that holds nothing is most likely a typo: say so (without naming
    other namespaces: their names are theirs)."""
    if mem.stats().namespace_events:
        return
    print(f"note: namespace {shown(mem.namespace)} holds nothing yet (choose another with "
          f"--namespace)", file=sys.stderr)


def _emit(args: argparse.Namespace, value: Any, lines: list[str]) -> None:
    """Print ``value`` as one JSON document with --json, else the human ``lines``."""
    if args.json:
        sys.stdout.write(msgspec.json.encode(value).decode() + "\n")
    else:
        for line in lines:
            print(line)


MAX_DIGITS = 19  # a seq or fact id is a signed 64-bit number


def _tx_point(value: str | None) -> int | str | None:
    """A transaction point from the command line: digits are a seq, anything else a time."""
    if value is None:
        return None
    text = value.strip()
    if not (text.isascii() and text.isdigit()):
        return value
    if len(text) > MAX_DIGITS:
        raise InvalidInput(f"seq {shown(text)} is too large; `hmem stats` shows the last seq")
    return int(text)


def _fact_id(value: str) -> int:
    try:
        return fact_id(value)
    except InvalidInput as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _namespace(value: str) -> str:
    # Checked here too: Memory() rejects an empty namespace only after taking the writer lock.
    if not value.strip():
        raise argparse.ArgumentTypeError("a namespace is a non-empty name, e.g. 'default'")
    return value


def _file_path(value: str) -> str:
    """A path argument: non-empty and without NUL bytes (which no file name can hold)."""
    if not value.strip():
        raise argparse.ArgumentTypeError("a path is a non-empty file or directory name")
    if "\x00" in value:
        raise argparse.ArgumentTypeError(f"a path cannot contain a NUL byte: {shown(value)}")
    return value


def _positive(value: str) -> int:
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
    with _memory(args, read_only=False) as m:
        new = m.remember(
            args.subject, args.text, valid_from=args.valid_from, valid_to=args.valid_to,
            confidence=args.confidence, entities=args.entity or (),
            source_agent=args.source_agent, source_ref=args.source_ref,
        )
    _emit(args, {"id": new}, [fmt.fact_id(new)])
    return 0


def cmd_revise(args: argparse.Namespace) -> int:
    with _memory(args, read_only=False) as m:
        new = m.revise(
            args.id, args.text, valid_from=args.valid_from, valid_to=args.valid_to,
            subject=args.subject, confidence=args.confidence, entities=args.entity or (),
            reason=args.reason, source_agent=args.source_agent, source_ref=args.source_ref,
        )
    _emit(args, {"id": new, "revises": args.id}, [fmt.fact_id(new)])
    return 0


def cmd_forget(args: argparse.Namespace) -> int:
    with _memory(args, read_only=False) as m:
        seq = m.forget(args.id, reason=args.reason)
    _emit(args, {"id": args.id, "seq": seq}, [f"forgot {fmt.fact_id(args.id)} (log seq {seq})"])
    return 0


def cmd_recall(args: argparse.Namespace) -> int:
    with _memory(args, read_only=True) as m:
        result = m.recall(
            args.query, limit=args.limit, max_tokens=args.max_tokens,
            as_of=_tx_point(args.as_of), valid_at=args.valid_at, subject=args.subject,
            explain=args.explain,
        )
    lines = fmt.recall_lines(result)
    if args.explain:
        lines += [f"  #{h.id}: " + ", ".join(f"{k} {v:g}" for k, v in (h.explain or {}).items())
                  for h in result.hits]
    _emit(args, result, lines)
    return 0


def cmd_reembed(args: argparse.Namespace) -> int:
    from hmem.progress import progress_bar

    with _memory(args, read_only=False) as m, \
            progress_bar("embedded", "facts", quiet=args.quiet) as progress:
        n = m.reembed(progress=progress)
        model = m.embedder.model if m.embedder else None
    _emit(args, {"embedded": n, "model": model},
          [f"recorded {n} vectors from {model} in namespace {args.namespace}"])
    return 0


def cmd_why(args: argparse.Namespace) -> int:
    with _memory(args, read_only=True) as m:
        why = m.why(args.id)
    _emit(args, why, fmt.why_lines(why))
    return 0


def cmd_diff(args: argparse.Namespace) -> int:
    with _memory(args, read_only=True) as m:
        diff = m.diff(_tx_point(args.since), _tx_point(args.until))
    _emit(args, diff, fmt.diff_lines(diff))
    return 0


def cmd_history(args: argparse.Namespace) -> int:
    with _memory(args, read_only=True) as m:
        facts = m.history(args.subject)
    _emit(args, facts, fmt.history_lines(args.subject, facts))
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    if args.usage:
        from hmem.usage import summarize_usage, usage_lines

        summary = summarize_usage(_root(args))
        _emit(args, summary, usage_lines(summary))
        return 0
    with _memory(args, read_only=True) as m:
        stats = m.stats()
    _emit(args, stats, fmt.stats_lines(stats))
    return 0


def cmd_mcp(args: argparse.Namespace) -> int:
    from hmem.usage import usage_enabled

    try:
        from hmem.mcp_server import serve
    except ImportError as e:
        return _fail(str(e))
    with _memory(args, read_only=args.read_only) as m:
        serve(m, usage_log=usage_enabled(args.usage_log), source_agent=args.source_agent)
    return 0


# ---------------------------------------------------------------------------- log and replay


def cmd_log_verify(args: argparse.Namespace) -> int:
    from eventlog.repair import verify_log

    report = verify_log(_log_dir(args))
    _emit(args, report, fmt.log_verify_lines(report, _root(args)))
    return 0 if report.ok else 1


def cmd_log_repair(args: argparse.Namespace) -> int:
    from eventlog.repair import repair_log

    report = repair_log(_log_dir(args), _root(args) / "backups")
    _emit(args, report, fmt.log_repair_lines(report))
    return 0


def cmd_log_show(args: argparse.Namespace) -> int:
    from eventlog.log import EventLog

    with EventLog(_log_dir(args), read_only=True) as log:
        last = log.last_seq
        stop = min(last, args.from_seq + args.limit - 1)
        events = list(log.read(args.from_seq, stop))
    _emit(args, events, [fmt.event_line(ev) for ev in events])
    if not args.json and stop < last:
        print(f"({last - stop} more; continue with --from {stop + 1})", file=sys.stderr)
    return 0


def cmd_replay_rebuild(args: argparse.Namespace) -> int:
    from hmem.progress import progress_bar

    with _memory(args, read_only=False) as m, \
            progress_bar("replayed", "events", quiet=args.quiet) as progress:
        n = m.rebuild(progress)
    _emit(args, {"events": n}, [f"rebuilt the projection from {n} events"])
    return 0


def cmd_replay_verify(args: argparse.Namespace) -> int:
    with _memory(args, read_only=False) as m:
        report = m.verify()
    lines = fmt.projection_diff_lines(report)
    value = {"ok": report.ok, "events": report.events, "tables": report.tables,
             "examples": report.examples}
    _emit(args, value, lines)
    return 0 if report.ok else 1


def cmd_export(args: argparse.Namespace) -> int:
    from hmem.export import export_parquet
    from hmem.progress import progress_bar

    with _memory(args, read_only=True) as m, \
            progress_bar("exported", "files", quiet=args.quiet) as progress:
        result = export_parquet(m, Path(args.parquet).expanduser(), progress=progress)
    lines = [f"exported namespace {result.namespace} (log seq {result.seq}) to "
             f"{result.directory}:"]
    lines += [f"  {Path(t.path).name:<22} {t.rows} rows" for t in result.tables.values()]
    _emit(args, result, lines)
    return 0


def cmd_timeline(args: argparse.Namespace) -> int:
    from hmem.timeline import plot_timeline, timeline_rows

    out = Path(args.out).expanduser()
    with _memory(args, read_only=True) as m:
        rows = timeline_rows(m, args.subject)
        plot_timeline(m, args.subject, out)
    _emit(args, {"out": str(out), "subjects": args.subject, "rows": rows},
          [f"wrote {out} ({len(rows)} facts about {', '.join(args.subject)})"])
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from hmem.demo import run_demo

    return run_demo(Path(args.path).expanduser() if args.path else None)


# ---------------------------------------------------------------------------- parser


class _Parser(argparse.ArgumentParser):
    """Usage errors are one line (what was wrong, and where the help is), exit code 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"error: {message} (see `{self.prog} --help`)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="hmem", description=DESCRIPTION, epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"hmem {__version__}")
    parser.add_argument("--path", metavar="DIR", default=None, type=_file_path,
                        help="store directory (default: $HMEM_HOME, else ~/.local/share/hmem)")
    parser.add_argument("--namespace", metavar="NS", type=_namespace,
                        default=os.environ.get("HMEM_NAMESPACE") or "default",
                        help="namespace (default: $HMEM_NAMESPACE, else 'default')")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument("--fsync", choices=FSYNC_POLICIES, default="always",
                        help="log durability for writes (default: always)")
    parser.add_argument("--embedder", metavar="NAME",
                        default=os.environ.get("HMEM_EMBEDDER") or "auto",
                        help="auto (the local model if installed), local, openai, hash, none "
                             "(default: $HMEM_EMBEDDER, else auto)")
    parser.add_argument("-q", "--quiet", action="store_true",
                        help="no progress bars (they are drawn only when stderr is a terminal)")
    sub = parser.add_subparsers(title="commands", metavar="COMMAND")
    _fact_commands(sub)
    _mcp_command(sub)
    _log_commands(sub)
    _replay_commands(sub)
    _analysis_commands(sub)
    demo = _command(sub, "demo", cmd_demo, "a one-minute tour: revise, time travel, why, forget",
                    ["hmem demo", "hmem demo --path /tmp/hmem-demo   # keep the store afterwards"],
                    common=False)
    demo.add_argument("--path", metavar="DIR", default=argparse.SUPPRESS, type=_file_path,
                      help="store to use (default: a temporary one, deleted afterwards)")
    return parser


def _command(
    sub: argparse._SubParsersAction, name: str, handler: Callable[[argparse.Namespace], int] | None,
    summary: str, examples: list[str], *, description: str | None = None, common: bool = True,
    writes: bool = False,
) -> argparse.ArgumentParser:
    """Add a subcommand with a one-line summary, a description and an Examples: epilog."""
    p = sub.add_parser(
        name, help=summary, description=description or summary[0].upper() + summary[1:] + ".",
        epilog="Examples:\n" + "\n".join(f"  {ex}" for ex in examples),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    if handler is not None:
        p.set_defaults(handler=handler)
    else:
        p.set_defaults(group_parser=p)
    if common:  # also accepted after the command; SUPPRESS keeps the global value otherwise
        p.add_argument("--path", metavar="DIR", default=argparse.SUPPRESS, type=_file_path,
                       help="store directory")
        p.add_argument("--namespace", metavar="NS", type=_namespace, default=argparse.SUPPRESS,
                       help="namespace")
        p.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                       help="print one JSON document")
        p.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS,
                       help="no progress bars")
    if writes:
        p.add_argument("--fsync", choices=FSYNC_POLICIES, default=argparse.SUPPRESS,
                       help="log durability (default: always)")
    return p


def _provenance(p: argparse.ArgumentParser) -> None:
    p.add_argument("--source-agent", metavar="AGENT", help="who said it (e.g. chat, planner)")
    p.add_argument("--source-ref", metavar="REF", help="where exactly (e.g. session:turn)")


def _statement(p: argparse.ArgumentParser) -> None:
    p.add_argument("--valid-from", metavar="TIME", help="when it became true (default: now)")
    p.add_argument("--valid-to", metavar="TIME", help="when it stopped being true (default: open)")
    p.add_argument("--confidence", metavar="X", type=float, default=1.0, help="0 to 1 (default: 1)")
    p.add_argument("--entity", metavar="E", action="append",
                   help="an entity it mentions (repeatable; default: proper nouns of TEXT)")


def _fact_commands(sub: argparse._SubParsersAction) -> None:
    p = _command(sub, "remember", cmd_remember, "store a new fact; prints its id", [
        'hmem remember maya "Maya lives in London" --valid-from 2025-01-01',
        'hmem remember maya "Maya is vegetarian" --source-agent chat --source-ref s1:t3',
    ], writes=True)
    p.add_argument("subject", help="who or what the fact is about")
    p.add_argument("text", help="the fact, as a sentence")
    _statement(p)
    _provenance(p)

    p = _command(sub, "revise", cmd_revise, "replace a fact with a new version; prints the new id",
                 ['hmem revise 1 "Maya lives in Paris" --valid-from 2026-03-01  # world changed',
                  'hmem revise 2 "Maya lives in Lyon" --reason "misheard"        # a correction'],
                 description="Replace a fact with a new version; prints the new id. With "
                 "--valid-from the world changed then (the old fact stays true before it); "
                 "without it this is a correction.", writes=True)
    p.add_argument("id", type=_fact_id, help="the fact to revise (its newest version)")
    p.add_argument("text", help="the new statement")
    _statement(p)
    p.add_argument("--subject", metavar="S", help="move the fact to another subject")
    p.add_argument("--reason", metavar="TEXT", help="why it was revised")
    _provenance(p)

    p = _command(sub, "forget", cmd_forget, "stop believing a fact (kept in history and why)", [
        'hmem forget 2 --reason "user asked"',
    ], writes=True)
    p.add_argument("id", type=_fact_id, help="the fact to forget")
    p.add_argument("--reason", metavar="TEXT", help="why it was forgotten")

    p = _command(sub, "recall", cmd_recall, "the facts most relevant to a query, best first", [
        'hmem recall "where does maya live"',
        'hmem recall "where does maya live" --as-of 2026-03-01T12:00:00Z   # believed then',
        'hmem recall "where does maya live" --as-of 1                      # at log seq 1',
        'hmem recall "where does maya live" --valid-at 2025-06-01          # true then',
    ])
    p.add_argument("query", help="what to ask about")
    p.add_argument("--limit", metavar="N", type=_positive, help="at most N hits (default: 10)")
    p.add_argument("--max-tokens", metavar="N", type=_positive, help="token budget (default: 1000)")
    p.add_argument("--as-of", metavar="TIME|SEQ", help="what was believed at that time or seq")
    p.add_argument("--valid-at", metavar="TIME", help="what was true in the world then")
    p.add_argument("--subject", metavar="S", help="only facts about this subject")
    p.add_argument("--explain", action="store_true", help="show each signal's contribution")

    p = _command(sub, "reembed", cmd_reembed,
                 "record vectors for facts that have none from the configured embedder",
                 ["hmem reembed                   # the local model (pip install 'hmem[local]')",
                  "hmem reembed --model openai    # HMEM_BASE_URL, HMEM_API_KEY, HMEM_EMBED_MODEL",
                  "hmem reembed --model hash-64   # a deterministic test embedder"],
                 writes=True)
    p.add_argument("--model", dest="embedder", metavar="NAME", default=argparse.SUPPRESS,
                   help="the embedder to use (same names as --embedder)")

    p = _command(sub, "why", cmd_why, "where a fact came from: source, revision chain, events", [
        "hmem why 2",
    ])
    p.add_argument("id", type=_fact_id, help="a fact id (any version of the chain)")

    p = _command(sub, "diff", cmd_diff, "what was added, revised and forgotten between two points",
                 ["hmem diff 1              # everything after log seq 1",
                  "hmem diff 2026-03-01 2026-03-08T12:00:00Z"])
    p.add_argument("since", metavar="SINCE", help="a time or seq (exclusive)")
    p.add_argument("until", metavar="UNTIL", nargs="?",
                   help="a time or seq (inclusive; default now)")

    p = _command(sub, "history", cmd_history,
                 "every fact ever stored about a subject, with versions", ["hmem history maya"])
    p.add_argument("subject", help="the subject (case-insensitive)")

    p = _command(sub, "stats", cmd_stats, "counts and the state of the log and projection",
                 ["hmem stats", "hmem --path ./agent-memory stats --json",
                  "hmem stats --usage    # which MCP tools an agent called (see hmem mcp --help)"])
    p.add_argument("--usage", action="store_true",
                   help="summarise the usage log instead: calls per tool, first and last use")


def _mcp_command(sub: argparse._SubParsersAction) -> None:
    p = _command(sub, "mcp", cmd_mcp, "serve this store to an agent over MCP (stdio)", [
        "hmem mcp                                  # the default store, namespace 'default'",
        "hmem mcp --path ~/notes-memory --namespace work --usage-log",
        "hmem mcp --read-only --embedder none      # recall and explain only",
        "claude mcp add hmem -- uvx hmem mcp       # register it with Claude Code",
    ], description="Serve this store to an agent over MCP on stdin/stdout (tools: remember, "
       "recall, revise, forget, why, diff, history, stats). The server holds the store open as "
       "its writer until the client disconnects; other processes can still read it. Needs "
       "pip install 'hmem[mcp]'.", writes=True)
    p.add_argument("--read-only", action="store_true",
                   help="offer only the read tools; never write (works beside another writer)")
    p.add_argument("--embedder", metavar="NAME", default=argparse.SUPPRESS,
                   help="auto, local, openai, hash, none (default: $HMEM_EMBEDDER, else auto)")
    p.add_argument("--usage-log", action="store_true",
                   help="append each tool call's name and time (never its text) to "
                        "<store>/usage.log; also $HMEM_USAGE_LOG=1")
    p.add_argument("--source-agent", metavar="AGENT", default="mcp",
                   help="recorded as the source agent of every write (default: mcp)")


def _log_commands(sub: argparse._SubParsersAction) -> None:
    group = _command(sub, "log", None, "check, repair or show the event log",
                     ["hmem log verify", "hmem log show --from 100 --limit 20"], common=False)
    lsub = group.add_subparsers(title="log commands", metavar="COMMAND")
    _command(lsub, "verify", cmd_log_verify, "read and check every record (safe beside a writer)",
             ["hmem log verify", "hmem --path ./agent-memory log verify --json"])
    _command(lsub, "repair", cmd_log_repair,
             "cut a damaged log back to its last good record, keeping a backup",
             ["hmem log repair", "hmem --path ./agent-memory log repair"],
             description="Cut a damaged log back to its last good record. Everything cut is "
             "copied to <store>/backups first; events after the damage are lost from the log. "
             "Stop the writer first.")
    p = _command(lsub, "show", cmd_log_show, "print decoded events, one per line",
                 ["hmem log show", "hmem log show --from 100 --limit 20", "hmem log show --json"])
    p.add_argument("--from", dest="from_seq", metavar="SEQ", type=_positive, default=1,
                   help="first seq (default: 1)")
    p.add_argument("--limit", metavar="N", type=_positive, default=100,
                   help="at most N events (default: 100)")


def _replay_commands(sub: argparse._SubParsersAction) -> None:
    group = _command(sub, "replay", None, "rebuild or verify the projection from the log",
                     ["hmem replay verify", "hmem replay rebuild"], common=False)
    rsub = group.add_subparsers(title="replay commands", metavar="COMMAND")
    _command(rsub, "rebuild", cmd_replay_rebuild, "drop the projection and replay the whole log",
             ["hmem replay rebuild"], writes=True)
    _command(rsub, "verify", cmd_replay_verify,
             "replay the log into a fresh database and compare it with the projection",
             ["hmem replay verify", "hmem replay verify --json"], writes=True)


def _analysis_commands(sub: argparse._SubParsersAction) -> None:
    p = _command(sub, "export", cmd_export,
                 "write this namespace's events, fact versions, facts and entities as Parquet",
                 ["hmem export --parquet ./audit      # events.parquet, fact_versions.parquet, ...",
                  "hmem --namespace work export --parquet ./work-audit --json",
                  "duckdb -c \"SELECT * FROM './audit/fact_versions.parquet'\"  # read it back"],
                 description="Write this namespace's events, fact versions (joined with their "
                 "facts), facts and entities as Parquet files, plus manifest.json, into DIR for "
                 "offline analysis (DuckDB, pandas, polars, Spark). Only this namespace's rows "
                 "are written. Safe beside a live writer.")
    p.add_argument("--parquet", metavar="DIR", required=True, type=_file_path,
                   help="directory to write into (created if needed; its export files replaced)")

    p = _command(sub, "timeline", cmd_timeline,
                 "draw what was believed about a subject over valid and transaction time",
                 ["hmem timeline maya --out timeline.png",
                  "hmem timeline maya tom --out people.svg   # several subjects, SVG",
                  "hmem --path ./agent-memory timeline maya --json"],
                 description="Draw every fact ever stored about SUBJECT: each version as a bar "
                 "over valid time (when it was true) and over transaction time (when it was "
                 "believed), revisions, corrections and forgets marked. PNG, SVG or PDF by the "
                 "extension of --out. Needs pip install 'hmem[plot]'.")
    p.add_argument("subject", nargs="+", help="the subject (case-insensitive); several allowed")
    p.add_argument("--out", metavar="FILE", default="timeline.png", type=_file_path,
                   help="image to write (default: timeline.png)")


def iter_parsers(
    parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every (command path, parser) below ``parser``, e.g. (("log", "verify"), <parser>)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield (*prefix, name), child
                yield from iter_parsers(child, (*prefix, name))
