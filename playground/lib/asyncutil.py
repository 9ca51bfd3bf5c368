"""Small asyncio helpers shared by the streaming paths."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from asgiref.sync import async_to_sync, sync_to_async


async def finish_even_if_cancelled[T](awaitable: Awaitable[T]) -> T:
    """Await `awaitable` to the end even if the awaiting task is cancelled meanwhile.

    For writes in `finally` blocks of streaming code: a client disconnect cancels the task,
    and a second cancellation while the row is being written must not lose it. The work
    runs in its own task; if we are cancelled, we still wait for it, then re-raise.
    """
    task = asyncio.ensure_future(awaitable)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        await task
        raise


def run_on_one_loop[**P, R](function: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    """Call the sync `function` so that every `async_to_sync` inside it shares one event loop.

    Called from sync code, each `async_to_sync` starts a thread with a new loop, and the HTTP
    seam keeps one pooled client per loop, so a step that polls, records and polls again paid
    for a new loop, client and connection each time. Here `function` runs inside one
    `async_to_sync(sync_to_async(...))`, so asgiref schedules those calls on that loop instead.
    `function` still runs in the calling thread, on its database connection and transactions.
    """
    return async_to_sync(sync_to_async(function))(*args, **kwargs)
