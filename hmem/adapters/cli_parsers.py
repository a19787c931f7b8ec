"""The parsers of the store-keeping commands (``log``, ``replay``, ``copy``), and
:func:`add_command`, which every ``hmem`` subcommand is made with (hmem/adapters/cli.py builds
the rest)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from eventlog.log import FSYNC_POLICIES
from hmem.adapters.cli_commands import (
    arg_file_path,
    arg_namespace,
    arg_positive,
    cmd_copy,
    cmd_log_checkpoint,
    cmd_log_keygen,
    cmd_log_repair,
    cmd_log_show,
    cmd_log_verify,
    cmd_replay_rebuild,
    cmd_replay_verify,
)

__all__ = ["add_command", "copy_command", "log_commands", "replay_commands"]


def add_command(
    sub: argparse._SubParsersAction[Any], name: str,
    handler: Callable[[argparse.Namespace], int] | None,
    summary: str, examples: list[str], *, description: str | None = None, common: bool = True,
    writes: bool = False,
) -> argparse.ArgumentParser:
    """Add a subcommand with a one-line summary, a description and an Examples: epilog."""
    p: argparse.ArgumentParser = sub.add_parser(
        name, help=summary, description=description or summary[0].upper() + summary[1:] + ".",
        epilog="Examples:\n" + "\n".join(f"  {ex}" for ex in examples),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    if handler is not None:
        p.set_defaults(handler=handler)
    else:
        p.set_defaults(group_parser=p)
    if common:  # also accepted after the command; SUPPRESS keeps the global value otherwise
        p.add_argument("--path", metavar="DIR", default=argparse.SUPPRESS, type=arg_file_path,
                       help="store directory, or postgresql://...")
        p.add_argument("--namespace", metavar="NS", type=arg_namespace, default=argparse.SUPPRESS,
                       help="namespace")
        for flags, helped in ((("--json",), "print one JSON document"),
                              (("-q", "--quiet"), "no progress bars")):
            p.add_argument(*flags, action="store_true", default=argparse.SUPPRESS, help=helped)
    if writes:
        p.add_argument("--fsync", choices=FSYNC_POLICIES, default=argparse.SUPPRESS,
                       help="log durability (default: always)")
    return p


def log_commands(sub: argparse._SubParsersAction[Any]) -> None:
    group = add_command(sub, "log", None, "check, repair or show the event log",
                     ["hmem log verify", "hmem log show --from 100 --limit 20"], common=False)
    lsub = group.add_subparsers(title="log commands", metavar="COMMAND")
    p = add_command(lsub, "verify", cmd_log_verify,
                 "read and check every record (safe beside a writer)",
                 ["hmem log verify", "hmem --path ./agent-memory log verify --json",
                  "hmem log verify --expect 120:3f2a...   # the head noted earlier (hmem stats)",
                  "hmem log verify --key ~/hmem.key --witness ~/hmem-witness.jsonl"],
                 description="Read and check every record (safe beside a writer) and print the "
                 "head, SEQ:HASH. --expect a head noted earlier fails if the log no longer holds "
                 "that prefix (rewritten or cut short); --key/--witness check signed checkpoints. "
                 "On a store on PostgreSQL: every row of hmem_log, its tx_us column and the "
                 "triggers that keep the table append-only.")
    p.add_argument("--expect", metavar="SEQ:HASH", help="a head noted earlier")
    p.add_argument("--key", metavar="FILE", type=arg_file_path,
                   help="the checkpoint key (kept outside the store)")
    p.add_argument("--witness", metavar="FILE", type=arg_file_path,
                   help="the witness file of signed checkpoints")
    p = add_command(lsub, "checkpoint", cmd_log_checkpoint,
                 "sign the log's head with a key kept outside the store",
                 ["hmem log checkpoint --key ~/hmem.key --witness ~/hmem-witness.jsonl"],
                 description="Append the log's head, signed with HMAC-SHA256 under --key, to the "
                 "--witness file. Keep both outside the store: a rewriter without the key can "
                 "neither forge a checkpoint nor keep the old ones valid.")
    p.add_argument("--key", metavar="FILE", type=arg_file_path, required=True,
                   help="the key (make one with `hmem log keygen FILE`)")
    p.add_argument("--witness", metavar="FILE", type=arg_file_path, required=True,
                   help="the witness file to append to")
    p = add_command(lsub, "keygen", cmd_log_keygen, "make a new random key for signed checkpoints",
                 ["hmem log keygen ~/hmem.key"], common=False)
    p.add_argument("file", metavar="FILE", type=arg_file_path, help="where to write the key")
    p.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                   help="print one JSON document")
    add_command(lsub, "repair", cmd_log_repair,
             "cut a damaged log back to its last good record, keeping a backup",
             ["hmem log repair", "hmem --path ./agent-memory log repair"],
             description="Cut a damaged log back to its last good record. Everything cut is "
             "copied to <store>/backups first; events after the damage are lost from the log. "
             "Stop the writer first. A store directory's only: a log on PostgreSQL is not cut "
             "back (RepairUnavailable; restore the database from a backup).")
    p = add_command(lsub, "show", cmd_log_show,
                 "print this namespace's decoded events, one per line",
                 ["hmem log show", "hmem log show --from 100 --limit 20", "hmem log show --json",
                  "hmem --namespace work log show"])
    p.add_argument("--from", dest="from_seq", metavar="SEQ", type=arg_positive, default=1,
                   help="first seq (default: 1)")
    p.add_argument("--limit", metavar="N", type=arg_positive, default=100,
                   help="at most N events (default: 100)")


def replay_commands(sub: argparse._SubParsersAction[Any]) -> None:
    group = add_command(sub, "replay", None, "rebuild or verify the projection from the log",
                     ["hmem replay verify", "hmem replay rebuild"], common=False)
    rsub = group.add_subparsers(title="replay commands", metavar="COMMAND")
    add_command(rsub, "rebuild", cmd_replay_rebuild, "drop the projection and replay the whole log",
             ["hmem replay rebuild"], writes=True)
    add_command(rsub, "verify", cmd_replay_verify,
             "replay the log into a fresh database and compare it with the projection",
             ["hmem replay verify", "hmem replay verify --json"], writes=True)


def copy_command(sub: argparse._SubParsersAction[Any]) -> None:
    p = add_command(
        sub, "copy", cmd_copy, "copy a store into a new one, embedded or on PostgreSQL",
        ["hmem copy ./agent-memory postgresql://hmem@db/agents",
         "hmem copy postgresql://hmem@db/agents ./agent-memory-backup",
         "hmem copy ./old ./new --key-file ~/keys/old.hmk --json"],
        description="Copy the store at SRC into the new or empty store at DST, by replaying "
        "its log: every event keeps its seq, times and provenance. Either may be a directory "
        "or a postgresql:// URL. The copy is read back through DST's hash chain and held "
        "equal to SRC, event by event, before DST's projection is built. A new embedded DST "
        "seals its texts with a key file of its own; what an erasure destroyed in SRC stays "
        "destroyed in DST.", common=False)
    p.add_argument("source", metavar="SRC", type=arg_file_path, help="the store to copy")
    p.add_argument("destination", metavar="DST", type=arg_file_path, help="a new or empty store")
    p.add_argument("--key-file", metavar="FILE", type=arg_file_path,
                   help="SRC's key file, when it is not in SRC's directory")
    for flags, helped in ((("--json",), "print one JSON document"),
                          (("-q", "--quiet"), "no progress bar")):
        p.add_argument(*flags, action="store_true", default=argparse.SUPPRESS, help=helped)
