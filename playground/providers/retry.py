"""The one retry layer for upstream calls.

An attempt is retried only while nothing has reached the caller: a retry after the first
event would show the user a second, different answer glued to the first. Retryable
failures are the ones `UpstreamHTTPError.retryable` names (408, 429, 5xx, connect
failures, timeouts); other 4xx are the caller's fault and fail at once. Waits honour
`Retry-After` and never exceed `UPSTREAM_MAX_RETRY_AFTER`, nor the overall deadline.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing
from itertools import count

from django.conf import settings

from playground.providers.http import UpstreamHTTPError

logger = logging.getLogger(__name__)

BACKOFF_BASE_SECONDS = 0.5


async def retrying[T](attempt: Callable[[], AsyncGenerator[T]], *, deadline: float) -> AsyncGenerator[T]:
    """Yield the events of `attempt()`, starting it again after a retryable failure.

    Raises the last `UpstreamHTTPError` when retries are exhausted, when the failure is not
    retryable, when an event was already yielded, or when waiting would pass `deadline`
    (event-loop time).
    """
    loop = asyncio.get_running_loop()
    for attempt_number in count():
        yielded = False
        try:
            async with aclosing(attempt()) as events:
                async for event in events:
                    yielded = True
                    yield event
            return
        except UpstreamHTTPError as exc:
            delay = retry_delay(exc, attempt_number=attempt_number)
            if (
                yielded
                or not exc.retryable
                or attempt_number >= settings.UPSTREAM_MAX_RETRIES
                or loop.time() + delay >= deadline
            ):
                raise
            logger.info(
                "upstream attempt %d failed (status=%s, timeout=%s); retrying in %.2f s",
                attempt_number + 1,
                exc.status,
                exc.is_timeout,
                delay,
            )
        await asyncio.sleep(delay)


def retry_delay(exc: UpstreamHTTPError, *, attempt_number: int) -> float:
    """`Retry-After` when given, else jittered exponential backoff; both capped."""
    cap = settings.UPSTREAM_MAX_RETRY_AFTER
    if exc.retry_after is not None:
        return min(exc.retry_after, cap)
    return min(cap, BACKOFF_BASE_SECONDS * 2**attempt_number) * random.uniform(0.5, 1.0)
