"""How a store on a server is named and shown: a ``postgresql://`` URL, never shown with its
password, and the errors that name it when the server refuses or fails."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

from eventlog.errors import AccessDenied, HmemError, ServerUnavailable, StoreNotFound

__all__ = ["denied", "is_server_url", "not_connected", "redacted", "unavailable"]

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


def not_connected(url: str, e: Exception) -> HmemError:
    """The error for a connection to the store at ``url`` the server refused or never
    answered."""
    state = getattr(e, "sqlstate", None)
    if state == "3D000":  # invalid_catalog_name: the database does not exist
        return StoreNotFound(f"no database for the store at {redacted(url)}: {str(e).strip()}")
    if state in ("28000", "28P01"):  # the role may not log in, or a wrong password
        return AccessDenied(f"the server refused the login to {redacted(url)}: "
                            f"{str(e).strip()}")
    return unavailable(url, e)


def denied(url: str, user: str, read_only: bool, e: Exception) -> AccessDenied:
    """The error for a role the server does not let read (or write) the store at ``url``."""
    action = "read" if read_only else "write"
    return AccessDenied(
        f"the role {user!r} may not {action} the store at {redacted(url)} "
        f"({str(e).strip()}). A role bound to namespaces "
        f"(grant_namespace) reads its rows in SQL (hmem_facts, hmem_fact_versions), not "
        f"through hmem; connect as the store's owner to use hmem"
    )


def unavailable(url: str, e: Exception) -> ServerUnavailable:
    """The error for the server of the store at ``url`` gone away (try again later)."""
    return ServerUnavailable(
        f"the PostgreSQL server of the store at {redacted(url)} is unavailable: "
        f"{' '.join(str(e).split())}; try again when it is back"
    )
