"""Database connections for code that runs outside Django's request cycle."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import cache

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections


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


async def db_run[T](work: Callable[[], T]) -> T:
    """Run blocking ORM `work` from async code that is not a Django view (the gateway).

    On SQLite, in asgiref's one shared thread: SQLite takes one writer at a time anyway, and
    a test's in-memory database refuses a second thread's write while one is open. On
    PostgreSQL, in a pool of `DB_THREADS` threads with a connection each: a request's work
    waits mostly on the server's answers, and in one thread every request waited for all the
    answers of the requests before it (issue 24). A pooled thread keeps its connection under
    a `CONN_MAX_AGE`, and closes it after each piece of work without one, as Django does at
    the end of a request.
    """
    if connections[DEFAULT_DB_ALIAS].vendor == "sqlite":
        return await sync_to_async(work)()
    return await sync_to_async(_closing_unkept(work), thread_sensitive=False, executor=_pool())()


def _closing_unkept[T](work: Callable[[], T]) -> Callable[[], T]:
    def run() -> T:
        try:
            return work()
        finally:
            for connection in connections.all(initialized_only=True):
                if not connection.settings_dict.get("CONN_MAX_AGE"):
                    connection.close()

    return run


@cache
def _pool() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=settings.DB_THREADS, thread_name_prefix="db")
