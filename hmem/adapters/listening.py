"""Where the HTTP adapters (``hmem serve``, ``hmem ui``) listen: this host only, or not."""

from __future__ import annotations

import ipaddress

__all__ = ["LOOPBACK_HOSTS", "is_loopback"]

LOOPBACK_HOSTS = ["127.0.0.1", "localhost", "::1", "[::1]"]


def is_loopback(host: str) -> bool:
    """Whether ``host`` is this host only (``localhost`` or a loopback address)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
