"""Database connections for code that runs outside Django's request cycle."""

from __future__ import annotations

from django.db import connections


def connections_heal() -> None:
    """Close this thread's connections that broke (or, with a `CONN_MAX_AGE`, grew too old).

    Django does this at the start and end of each request it serves (`close_old_connections`).
    A plain ASGI app (the gateway) calls it before its database work instead, but keeps a
    healthy connection for the next request even under `CONN_MAX_AGE = 0`: reconnecting per
    request is the cost that setting saves nobody when all the work runs in one thread.
    """
    for connection in connections.all(initialized_only=True):
        if connection.connection is None:
            continue
        if connection.settings_dict.get("CONN_MAX_AGE"):
            connection.close_if_unusable_or_obsolete()
        elif connection.errors_occurred and not connection.is_usable():
            connection.close()
