"""The ``hmem`` command line: a thin adapter over :class:`hmem.memory.Memory`.

Each command opens the store, calls one library method, prints, and closes. Library errors
(:class:`hmem.errors.HmemError`) become one ``error: ...`` line on stderr and exit code 1; usage
errors exit 2. Read commands open the store read-only, so they work beside a live writer.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import sys
import warnings
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, NoReturn, TextIO

from eventlog.log import FSYNC_POLICIES
from hmem.adapters import cli_format as fmt
from hmem.adapters.cli_commands import (
    arg_fact_id,
    arg_file_path,
    arg_namespace,
    arg_positive,
    cmd_beliefs,
    cmd_consolidate,
    cmd_demo,
    cmd_diff,
    cmd_erase,
    cmd_export,
    cmd_forget,
    cmd_history,
    cmd_mcp,
    cmd_recall,
    cmd_recalls,
    cmd_reembed,
    cmd_remember,
    cmd_replay_recall,
    cmd_revise,
    cmd_stats,
    cmd_timeline,
    cmd_why,
    fail,
    say,
)
from hmem.adapters.cli_parsers import add_command as _command
from hmem.adapters.cli_parsers import copy_command, log_commands, replay_commands
from hmem.adapters.cli_serve import serve_commands
from hmem.adapters.cli_ui import ui_commands
from hmem.errors import HmemError
from hmem.version import __version__

if TYPE_CHECKING:
    pass

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

Times are ISO 8601 with a zone ('2025-01-01', '2025-01-01T09:30:00Z') or spoken, in UTC
('yesterday 14:02', '2pm', '3 days ago', 'last week'); --as-of and diff also take a log seq
(e.g. 42). The store is --path, else $HMEM_HOME, else ~/.local/share/hmem.
Add --json to any command for one JSON document on stdout. `hmem COMMAND --help` for more."""


# ---------------------------------------------------------------------------- entry point


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the exit code (0 ok, 1 error, 2 usage error)."""
    parser = build_parser()
    words = sys.argv[1:] if argv is None else list(argv)
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # --help, --version and usage errors
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
        if code == 2 and "--json" in words and _Parser.last_error:
            _json_error("UsageError", _Parser.last_error)
        return code
    handler: Callable[[argparse.Namespace], int] | None = getattr(args, "handler", None)
    if handler is None:  # `hmem` or `hmem log` without a subcommand
        getattr(args, "group_parser", parser).print_help()
        return 0
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _show_warning
            return handler(args)
    except HmemError as e:
        message = _for_the_shell(str(e) or type(e).__name__)
        if getattr(args, "json", False):
            _json_error(type(e).__name__, message)
        return fail(message)
    except BrokenPipeError:  # e.g. `hmem log show | head`
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except OSError as e:  # e.g. permission denied on --path
        return fail(f"{e.strerror or e}: {e.filename}" if e.filename else str(e))
    except KeyboardInterrupt:
        return 130


def _for_the_shell(message: str) -> str:
    """An error's message as a shell user can act on it: where the library suggests Python
    (a datetime with a zone), the CLI suggests the ISO string form it takes."""
    from hmem.time.iso import PYTHON_ZONE_HINT, SHELL_ZONE_HINT

    return message.replace(PYTHON_ZONE_HINT, SHELL_ZONE_HINT)


def _show_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                  file: TextIO | None = None, line: str | None = None) -> None:
    """Warnings as lines on stderr like any other (the message may quote stored text)."""
    text = warnings.formatwarning(fmt.visible(str(message)), category, filename, lineno, line)
    for part in text.rstrip("\n").split("\n"):
        say(part, err=True)


# ---------------------------------------------------------------------------- parser


def _json_error(kind: str, message: str) -> None:
    """With --json, an error is also one JSON document on stdout (scripts parse stdout)."""
    print(json.dumps({"error": {"type": kind, "message": " ".join(message.splitlines())}}))


class _Parser(argparse.ArgumentParser):
    """Usage errors are one line (what was wrong, and where the help is), exit code 2; a
    mistyped command or choice gets the closest valid ones suggested."""

    last_error = ""  # the last usage error's text, for --json

    def error(self, message: str) -> NoReturn:
        _Parser.last_error = f"{message} (see `{self.prog} --help`)"
        line = " ".join(f"error: {_Parser.last_error}".splitlines())
        self.exit(2, fmt.visible(line) + "\n")  # it may quote an argument, e.g. an unknown one

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        choices = action.choices
        if choices is None or value in choices or not isinstance(value, str):
            super()._check_value(action, value)
            return
        names = [str(c) for c in choices]
        close = difflib.get_close_matches(value, names, n=3, cutoff=0.6)
        hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
        raise argparse.ArgumentError(
            action, f"invalid choice: {value!r}{hint} (choose from {', '.join(names)})"
        )


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="hmem", description=DESCRIPTION, epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"hmem {__version__}")
    parser.add_argument("--path", metavar="DIR|URL", default=None, type=arg_file_path,
                        help="store directory, or postgresql://... (default: $HMEM_HOME, else "
                             "~/.local/share/hmem)")
    parser.add_argument("--namespace", metavar="NS", type=arg_namespace,
                        default=os.environ.get("HMEM_NAMESPACE") or "default",
                        help="namespace (default: $HMEM_NAMESPACE, else 'default')")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument("--fsync", choices=FSYNC_POLICIES, default="always",
                        help="log durability for writes (default: always)")
    parser.add_argument("--embedder", metavar="NAME",
                        default=os.environ.get("HMEM_EMBEDDER") or "auto",
                        help="auto (the local model if installed), local, openai, hash, none "
                             "(default: $HMEM_EMBEDDER, else auto)")
    parser.add_argument("--memory-mb", metavar="MIB", type=arg_positive,
                        default=os.environ.get("HMEM_MEMORY_MB") or None,
                        help="at most this many MiB of loaded namespaces, the least recently "
                             "used dropped past it (default: $HMEM_MEMORY_MB, else no bound)")
    parser.add_argument("-q", "--quiet", action="store_true",
                        help="no progress bars (they are drawn only when stderr is a terminal)")
    sub = parser.add_subparsers(title="commands", metavar="COMMAND")
    _fact_commands(sub)
    _mcp_command(sub)
    serve_commands(sub)
    ui_commands(sub)
    log_commands(sub)
    replay_commands(sub)
    copy_command(sub)
    _analysis_commands(sub)
    demo = _command(sub, "demo", cmd_demo, "a one-minute tour: revise, time travel, why, forget",
                    ["hmem demo", "hmem demo --path /tmp/hmem-demo   # keep the store afterwards"],
                    common=False)
    demo.add_argument("--path", metavar="DIR", default=argparse.SUPPRESS, type=arg_file_path,
                      help="store to use (default: a temporary one, deleted afterwards)")
    return parser


def _provenance(p: argparse.ArgumentParser) -> None:
    p.add_argument("--source-agent", metavar="AGENT", help="who said it (e.g. chat, planner)")
    p.add_argument("--source-ref", metavar="REF", help="where exactly (e.g. session:turn)")
    p.add_argument("--request-id", metavar="ID", help="retry-safe: a write with ID is made once")


def _statement(p: argparse.ArgumentParser) -> None:
    p.add_argument("--valid-from", metavar="TIME", help="when it became true (default: now)")
    p.add_argument("--valid-to", metavar="TIME", help="when it stopped being true (default: open)")
    p.add_argument("--confidence", metavar="X", type=float, default=1.0, help="0 to 1 (default: 1)")
    p.add_argument("--entity", metavar="E", action="append",
                   help="an entity it mentions (repeatable; default: proper nouns of TEXT)")


def _fact_commands(sub: argparse._SubParsersAction[Any]) -> None:
    p = _command(sub, "remember", cmd_remember, "store a new fact; prints its id", [
        'hmem remember maya "Maya lives in London" --valid-from 2025-01-01',
        'hmem remember maya "Maya is vegetarian" --source-agent chat --source-ref s1:t3',
    ], writes=True)
    p.add_argument("subject", help="who or what the fact is about")
    p.add_argument("text", help="the fact, as a sentence")
    _statement(p)
    _provenance(p)
    p.add_argument("--no-dedup", action="store_true",
                   help="store it even if a current fact of the subject already says it "
                   "(by default its id is printed and nothing is written)")

    p = _command(sub, "revise", cmd_revise, "replace a fact with a new version; prints the new id",
                 ['hmem revise 1 "Maya lives in Paris" --valid-from 2026-03-01  # world changed',
                  'hmem revise 2 "Maya lives in Lyon" --reason "misheard"        # a correction'],
                 description="Replace a fact with a new version; prints the new id. With --valid-"
                 "from the world changed then (the old fact stays true before it); else a "
                 "correction.", writes=True)
    p.add_argument("id", type=arg_fact_id, help="the fact to revise (its newest version)")
    p.add_argument("text", help="the new statement")
    _statement(p)
    p.add_argument("--subject", metavar="S", help="move the fact to another subject")
    p.add_argument("--reason", metavar="TEXT", help="why it was revised")
    _provenance(p)

    p = _command(sub, "forget", cmd_forget, "stop believing a fact (kept in history and why)", [
        'hmem forget 2 --reason "user asked"'], writes=True)
    p.add_argument("id", type=arg_fact_id, help="the fact to forget")
    p.add_argument("--reason", metavar="TEXT", help="why it was forgotten")
    _provenance(p)

    p = _command(sub, "recall", cmd_recall, "the facts most relevant to a query, best first", [
        'hmem recall "where does maya live"',
        'hmem recall "where does maya live" --as-of 2026-03-01T12:00:00Z   # believed then',
        'hmem recall "where does maya live" --as-of 1                      # at log seq 1',
        'hmem recall "where does maya live" --valid-at 2025-06-01          # true then',
        'hmem recall "where does maya live" --log --source-ref s10:t1      # logged, replayable',
    ])
    p.add_argument("query", help="what to ask about")
    p.add_argument("--limit", metavar="N", type=arg_positive, help="at most N hits (default: 10)")
    p.add_argument("--max-tokens", metavar="N", type=arg_positive,
                   help="token budget (default: none, --limit hits)")
    p.add_argument("--as-of", metavar="TIME|SEQ", help="what was believed at that time or seq")
    p.add_argument("--valid-at", metavar="TIME", help="what was true in the world then")
    p.add_argument("--subject", metavar="S", help="only facts about this subject")
    p.add_argument("--explain", action="store_true", help="show each signal's contribution")
    p.add_argument("--log", action="store_true",
                   help="log this recall as an event (opens the store as its writer; see hmem "
                        "recalls, hmem replay-recall)")
    p.add_argument("--source-ref", metavar="REF",
                   help="with --log: who asked (e.g. session:turn)")

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
    p.add_argument("id", type=arg_fact_id, help="a fact id (any version of the chain)")

    p = _command(sub, "beliefs", cmd_beliefs,
                 "every belief at a point (not only what matches a query)",
                 ["hmem beliefs                          # what is believed now",
                  "hmem beliefs --as-of 2026-03-01T14:02:00Z",
                  "hmem beliefs --as-of 12 --valid-at 2025-06-01 --json"])
    p.add_argument("--as-of", metavar="TIME|SEQ", help="what was believed then (default: now)")
    p.add_argument("--valid-at", metavar="TIME", help="only what was true in the world then")

    p = _command(sub, "recalls", cmd_recalls,
                 "recalls the agent made (logged with --log-recalls / log_recalls=True)",
                 ["hmem recalls", "hmem recalls --source-ref s4:t7",
                  "hmem recalls --since 2026-03-01 --json"])
    p.add_argument("--since", metavar="TIME|SEQ", help="only after this time or seq")
    p.add_argument("--until", metavar="TIME|SEQ", help="only up to this time or seq")
    p.add_argument("--source-ref", metavar="REF", help="only this caller's (e.g. session:turn)")

    p = _command(sub, "replay-recall", cmd_replay_recall,
                 "re-run a logged recall against the log as it was; exit 1 if it differs",
                 ["hmem replay-recall 42"],
                 description="Re-run the recall logged at SEQ against the log as it was then, "
                 "with its logged parameters, ranking knobs and query vector, and compare the "
                 "hits. Exit status 0 when they are the same, 1 when this version of hmem ranks "
                 "differently (both lists are shown).")
    p.add_argument("seq", type=arg_fact_id, metavar="SEQ", help="the recall's seq (hmem recalls)")

    p = _command(sub, "diff", cmd_diff, "what was added, revised and forgotten between two points",
                 ["hmem diff 1              # everything after log seq 1",
                  "hmem diff 2026-03-01 2026-03-08T12:00:00Z"])
    p.add_argument("since", metavar="SINCE", help="a time or seq (exclusive)")
    p.add_argument("until", metavar="UNTIL", nargs="?",
                   help="a time or seq (inclusive; default now)")

    p = _command(sub, "history", cmd_history,
                 "every fact ever stored about a subject, with versions", ["hmem history maya"])
    p.add_argument("subject", help="the subject (case-insensitive)")

    p = _command(sub, "consolidate", cmd_consolidate,
                 "propose what to forget: duplicates, replaced and stale facts", [
                     "hmem consolidate                       # proposals only",
                     "hmem consolidate --accept duplicate:12:15 replaced:3:9",
                     "hmem consolidate --apply               # every proposal",
                 ], writes=True)
    p.add_argument("--apply", action="store_true", help="forget what every proposal names")
    p.add_argument("--accept", nargs="+", metavar="ID", help="apply these proposals only")
    p.add_argument("--similarity", type=float, default=0.95, metavar="COS",
                   help="cosine at which two facts' vectors say the same (default 0.95)")
    p.add_argument("--stale-days", type=float, default=90.0, metavar="N",
                   help="an episodic fact unused this long is stale (default 90)")

    p = _command(sub, "erase", cmd_erase,
                 "erase texts for real (keys destroyed, files rebuilt), with a receipt", [
                     "hmem erase --subject alice              # shows what it would erase",
                     "hmem erase --fact 12 --yes --reason 'user request' --by dpo"], writes=True)
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--fact", type=int, metavar="ID", help="a fact: its whole revision chain")
    what.add_argument("--subject", metavar="NAME", help="every fact that ever had this subject")
    what.add_argument("--episode", type=int, metavar="SEQ",
                      help="an episode, and the facts derived from it")
    what.add_argument("--session", metavar="ID",
                      help="a session's episodes, and the facts derived from them")
    what.add_argument("--namespace-all", metavar="NAME", dest="whole",
                      help="everything in this namespace (name it: the --namespace in use)")
    p.add_argument("--reason", help="why (kept in the receipt: no personal data here)")
    p.add_argument("--by", metavar="WHO", help="who erases (kept in the receipt)")
    p.add_argument("--yes", action="store_true", help="erase (else: show what it would erase)")

    p = _command(sub, "stats", cmd_stats, "counts and the state of the log and projection",
                 ["hmem stats", "hmem --path ./agent-memory stats --json",
                  "hmem stats --usage    # which MCP tools an agent called (see hmem mcp --help)"])
    p.add_argument("--usage", action="store_true",
                   help="summarise the usage log instead: calls per tool, first and last use")


def _mcp_command(sub: argparse._SubParsersAction[Any]) -> None:
    p = _command(sub, "mcp", cmd_mcp, "serve this store to an agent over MCP (stdio)", [
        "hmem mcp                                  # the default store, namespace 'default'",
        "hmem mcp --path ~/notes-memory --namespace work --usage-log",
        "hmem mcp --read-only --embedder none      # recall and explain only",
        "claude mcp add hmem -- uvx --from \"hmem[mcp] @ file://$PWD\" hmem mcp   # Claude Code",
    ], description="Serve this store to an agent over MCP on stdin/stdout (tools: remember, "
       "recall, revise, forget, why, diff, history, stats). The server holds the store open as "
       "its writer until the client disconnects; other processes can still read it. Needs "
       "pip install '.[mcp]' (in hmem's checkout).", writes=True)
    p.add_argument("--read-only", action="store_true",
                   help="offer only the read tools; never write (works beside another writer)")
    p.add_argument("--memory-mb", metavar="MIB", type=arg_positive, default=argparse.SUPPRESS,
                   help="bound on the loaded namespaces (default: $HMEM_MEMORY_MB, else none)")
    p.add_argument("--embedder", metavar="NAME", default=argparse.SUPPRESS,
                   help="auto, local, openai, hash, none (default: $HMEM_EMBEDDER, else auto)")
    p.add_argument("--usage-log", action="store_true",
                   help="append each tool call's name and time (never its text) to "
                        "<store>/usage.log; also $HMEM_USAGE_LOG=1")
    p.add_argument("--source-agent", metavar="AGENT", default="mcp",
                   help="recorded as the source agent of every write (default: mcp)")
    p.add_argument("--log-recalls", action="store_true",
                   help="log every recall (query, parameters, hits) as an event, for `hmem "
                        "recalls` and `hmem replay-recall`; also $HMEM_LOG_RECALLS=1")


def _analysis_commands(sub: argparse._SubParsersAction[Any]) -> None:
    p = _command(sub, "export", cmd_export,
                 "write this namespace's tables as Parquet, or its log as JSON Lines",
                 ["hmem export --parquet ./audit      # events.parquet, fact_versions.parquet, ...",
                  "hmem export --jsonl audit.jsonl    # the log, one JSON event per line",
                  "hmem export --jsonl - | jq -c 'select(.type == \"recall\")'",
                  "hmem --namespace work export --parquet ./work-audit --json",
                  "duckdb -c \"SELECT * FROM './audit/fact_versions.parquet'\"  # read it back"],
                 description="Write this namespace's events, fact versions (joined with their "
                 "facts), facts and entities as Parquet files, plus manifest.json, into DIR for "
                 "offline analysis (DuckDB, pandas, polars, Spark). Only this namespace's rows "
                 "are written. With --jsonl FILE instead: the namespace's whole log as JSON "
                 "Lines, one event per line in seq order (logged recalls included). Safe beside "
                 "a live writer.")
    to = p.add_mutually_exclusive_group(required=True)
    to.add_argument("--parquet", metavar="DIR", type=arg_file_path,
                    help="directory to write into (created if needed; its export files replaced)")
    to.add_argument("--jsonl", metavar="FILE",
                    help="write the namespace's log as JSON Lines instead (one event per line, "
                         "recalls included; - for standard output)")

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
    p.add_argument("--out", metavar="FILE", default="timeline.png", type=arg_file_path,
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
