"""How a store on a server is named and shown: a ``postgresql://`` URL, never shown with its
password."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

__all__ = ["is_server_url", "redacted"]

_SCHEMES = ("postgresql://", "postgres://")


def is_server_url(target: object) -> bool:
    """Whether ``target`` names a PostgreSQL store (a ``postgresql://`` URL), not a directory."""
    return isinstance(target, str) and target.startswith(_SCHEMES)


def redacted(url: str) -> str:
    """``url`` with its password (in the authority or as ``password=``) shown as ``***``: what
    messages and reports show."""
    parts = urlsplit(url)
    netloc, query = parts.netloc, parts.query
    if parts.password is not None:
        netloc = f"{parts.username or ''}:***@{netloc.rsplit('@', 1)[1]}"
    if "password=" in query:
        query = "&".join("password=***" if q.startswith("password=") else q
                         for q in query.split("&"))
    return urlunsplit(parts._replace(netloc=netloc, query=query))
