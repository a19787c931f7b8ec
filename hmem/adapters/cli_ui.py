"""``hmem ui``: the auditor's page (:mod:`hmem.adapters.audit_page`), read-only, over one
store; its parser and its command."""

from __future__ import annotations

import argparse
from typing import Any

from hmem.adapters.cli_commands import fail, open_memory, say
from hmem.adapters.cli_parsers import add_command
from hmem.adapters.listening import add_listen_arguments, is_loopback
from hmem.errors import InvalidInput

__all__ = ["ui_commands"]


def ui_commands(sub: argparse._SubParsersAction[Any]) -> None:
    p = add_command(sub, "ui", cmd_ui, "serve the auditor's page: a read-only web page over "
                    "this store", [
                        "hmem ui                                    # http://127.0.0.1:8766/",
                        "hmem --path ./agent-memory ui --namespace work --port 9000",
                    ], description="Serve a read-only web page over this store for an audit: "
                    "search what the agent believed (as of a transaction time, valid at a "
                    "world time), a fact's timeline with its provenance, events and erasure "
                    "receipts, the changes between two moments, and the logged recalls with "
                    "their replay. It opens the store read-only, so it runs beside the writers. "
                    "This host only (127.0.0.1) unless --host names another address and "
                    "--allow-remote is given: the page has no authentication. Needs pip install "
                    "'.[mcp]' (starlette and uvicorn).")
    add_listen_arguments(p, 8766)
    p.add_argument("--allow-remote", action="store_true",
                   help="allow a --host other than loopback: anyone who reaches it reads every "
                        "namespace of the store, with no authentication")


def cmd_ui(args: argparse.Namespace) -> int:
    try:
        import uvicorn

        from hmem.adapters.audit_page import audit_app
    except ImportError as e:
        return fail(f"hmem ui needs starlette and uvicorn: pip install '.[mcp]' ({e})")
    if not is_loopback(args.host):
        if not args.allow_remote:
            raise InvalidInput(
                f"serving the page on {args.host} (not this host only) needs --allow-remote: "
                f"the page has no authentication, anyone who reaches it reads the whole store"
            )
        say(f"warning: hmem ui on {args.host} has no authentication: anyone who reaches "
            f"port {args.port} reads every namespace of this store", err=True)
    with open_memory(args, read_only=True) as m:
        app = audit_app(m, host=args.host)
        say(f"hmem ui: {m.store.backend.shown} (read-only) on http://{args.host}:{args.port}/ "
            f"(namespace {args.namespace!r})", err=True)
        uvicorn.run(app, host=args.host, port=args.port, log_level="warning",
                    limit_concurrency=64, timeout_graceful_shutdown=5)
    return 0
