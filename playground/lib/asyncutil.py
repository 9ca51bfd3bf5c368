"""Small asyncio helpers shared by the streaming paths and the gateway."""

from __future__ import annotations

import asyncio
import math
import time
import weakref
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


class GroupQueue[T, R]:
    """Items submitted while a group is being handled go together, as the next group.

    `handle` takes a group (in the order submitted) and returns one result per item, or an
    exception for an item that failed alone; an exception it raises fails the whole group.
    Alone, an item is handled at once; under load, groups grow by themselves. `every`: a group
    starts at most this many seconds after the previous one (0: at once), for work whose cost
    is mostly per group and whose callers can wait that long.
    """

    def __init__(
        self, handle: Callable[[list[T]], Awaitable[list[R | Exception]]], *, every: float = 0.0
    ) -> None:
        self._handle = handle
        self._every = every
        self._waiting: list[tuple[T, asyncio.Future[R]]] = []
        self._worker: asyncio.Task[None] | None = None

    async def submit(self, item: T) -> R:
        """`item`'s result, once its group has been handled."""
        done: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        self._waiting.append((item, done))
        if self._worker is None or self._worker.done():
            self._worker = asyncio.create_task(self._work(), name="group-queue")
        return await done

    async def _work(self) -> None:
        started = -math.inf
        while self._waiting:
            await asyncio.sleep(max(0.0, started + self._every - time.monotonic()))  # none for the first
            started = time.monotonic()
            group, self._waiting = self._waiting, []
            try:
                results = await self._handle([item for item, _ in group])
            except BaseException as exc:  # the group failed whole, or the loop is closing
                for _, done in group:
                    if not done.done():
                        done.set_exception(exc)
                if not isinstance(exc, Exception):
                    raise
                continue
            for (_, done), result in zip(group, results, strict=True):
                if done.done():  # its caller was cancelled
                    continue
                if isinstance(result, Exception):
                    done.set_exception(result)
                else:
                    done.set_result(result)


def loop_local[Q](
    registry: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Q], make: Callable[[], Q]
) -> Q:
    """The running event loop's entry of `registry`, made by `make` on first use (an object
    holding futures or tasks must not cross loops: tests, Channels and Celery each run their own)."""
    loop = asyncio.get_running_loop()
    found = registry.get(loop)
    if found is None:
        found = registry[loop] = make()
    return found
