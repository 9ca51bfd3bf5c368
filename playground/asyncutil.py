"""Small asyncio helpers shared by the streaming paths."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable


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
