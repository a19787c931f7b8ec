"""``hmem serve`` (the MCP tools over Streamable HTTP: :mod:`hmem.adapters.mcp_http`) and
``hmem token`` (a bearer token for it), their parsers and their commands."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from hmem.adapters.cli_commands import arg_namespace, arg_positive, fail, open_memory, say
from hmem.adapters.cli_parsers import add_command
from hmem.adapters.listening import add_listen_arguments, is_loopback
from hmem.errors import InvalidInput

__all__ = ["serve_commands"]


def serve_commands(sub: argparse._SubParsersAction[Any]) -> None:
    p = add_command(sub, "serve", cmd_serve, "serve this store over MCP on HTTP (Streamable "
                    "HTTP), for agents on other hosts", [
                        "hmem serve                                 # http://127.0.0.1:8765/mcp",
                        "hmem serve --namespace work --also notes   # /mcp and /ns/notes/mcp",
                        "hmem token agent-7 --namespace work >> tokens.jsonl   # prints the token",
                        "hmem serve --host 0.0.0.0 --tokens tokens.jsonl",
                    ], description="Serve this store's MCP tools (those of hmem mcp) over the "
                    "Streamable HTTP transport to any number of clients, from one process and "
                    "one derived state. /mcp serves --namespace; /ns/<namespace>/mcp each other "
                    "namespace served. On a loopback address no token is needed unless "
                    "--tokens is given; on any other address --tokens is required, and a token "
                    "reaches only the namespaces it is bound to. Needs pip install '.[mcp]' "
                    "(mcp >= 2).", writes=True)
    add_listen_arguments(p, 8765)
    p.add_argument("--tokens", metavar="FILE", default=os.environ.get("HMEM_TOKENS"),
                   help="the tokens file (hmem token); also $HMEM_TOKENS. Every namespace a "
                        "token is bound to is served")
    p.add_argument("--also", metavar="NS", action="append", type=arg_namespace, default=[],
                   help="serve this namespace too, at /ns/NS/mcp (repeatable)")
    p.add_argument("--read-only", action="store_true",
                   help="offer only the read tools; never write")
    p.add_argument("--memory-mb", metavar="MIB", type=arg_positive, default=argparse.SUPPRESS,
                   help="bound on the loaded namespaces (default: $HMEM_MEMORY_MB, else none)")
    p.add_argument("--embedder", metavar="NAME", default=argparse.SUPPRESS,
                   help="auto, local, openai, hash, none (default: $HMEM_EMBEDDER, else auto)")
    p.add_argument("--usage-log", action="store_true",
                   help="append each tool call's name and time to <store>/usage.log")
    p.add_argument("--source-agent", metavar="AGENT", default="mcp-http",
                   help="recorded as the source agent of every write (default: mcp-http)")
    t = add_command(sub, "token", cmd_token, "make a bearer token for hmem serve, bound to "
                    "namespaces", ["hmem token agent-7 --namespace work --namespace notes "
                                   ">> tokens.jsonl"],
                    description="Print a new random token on stderr and, on stdout, the "
                    "tokens-file line that binds it to the namespaces (its SHA-256 only: the "
                    "file never holds the token). Give the token to the client once; append "
                    "the line to the file hmem serve --tokens reads.", common=False)
    t.add_argument("name", help="who the token is for (kept in the file, for you)")
    t.add_argument("--namespace", dest="bound", metavar="NS", action="append", required=True,
                   type=arg_namespace, help="a namespace the token may use (repeatable)")


def cmd_token(args: argparse.Namespace) -> int:
    from hmem.adapters.mcp_http import new_token

    token, line = new_token(args.name, args.bound)
    print(f"token for {args.name} (shown once; give it to the client): {token}",
          file=sys.stderr)
    print(line)
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    from hmem.adapters.usage import UsageLog, usage_enabled

    try:
        import uvicorn

        from hmem.adapters.mcp_http import Tokens, http_app
    except ImportError as e:
        return fail(f"hmem serve needs the MCP SDK (>= 2): pip install '.[mcp]' ({e})")
    from importlib.metadata import version

    if int(version("mcp").split(".")[0]) < 2:
        return fail(f"hmem serve needs the MCP SDK 2 or later (installed: {version('mcp')}): "
                    f"pip install 'mcp>=2' (hmem mcp, over stdio, works with either)")
    tokens = None if args.tokens is None else Tokens.read(args.tokens)
    if tokens is None and not is_loopback(args.host):
        raise InvalidInput(
            f"serving on {args.host} (not this host only) needs --tokens FILE: make one with "
            f"hmem token NAME --namespace NS >> FILE"
        )
    namespaces = [args.namespace, *args.also, *(tokens.namespaces if tokens else [])]
    with open_memory(args, read_only=args.read_only) as m:
        usage = UsageLog(m.path) if usage_enabled(args.usage_log) else None
        app = http_app(m, namespaces, tokens=tokens, host=args.host, usage=usage,
                       source_agent=args.source_agent)
        served = ", ".join(repr(ns) for ns in dict.fromkeys(namespaces))
        say(f"hmem serve: {m.store.backend.shown} on http://{args.host}:{args.port}/mcp "
            f"(namespaces {served}; {'tokens' if tokens else 'no token: this host only'})",
            err=True)
        uvicorn.run(app, host=args.host, port=args.port, log_level="warning",
                    limit_concurrency=512, timeout_graceful_shutdown=5)
    return 0
