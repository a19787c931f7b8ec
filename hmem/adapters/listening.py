"""Where the HTTP adapters (``hmem serve``, ``hmem ui``) listen: this host only, or not."""

from __future__ import annotations

import argparse
import ipaddress

__all__ = ["LOOPBACK_HOSTS", "add_listen_arguments", "is_loopback"]

LOOPBACK_HOSTS = ["127.0.0.1", "localhost", "::1", "[::1]"]


def is_loopback(host: str) -> bool:
    """Whether ``host`` is this host only (``localhost`` or a loopback address)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def add_listen_arguments(parser: argparse.ArgumentParser, port: int) -> None:
    """``--host`` (default 127.0.0.1: this host only) and ``--port`` (default ``port``)."""
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default: "
                        "127.0.0.1, this host only)")
    parser.add_argument("--port", type=int, default=port, help=f"port (default: {port})")
