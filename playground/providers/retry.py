"""The one retry layer for upstream calls.

An attempt is retried only while nothing has reached the caller: a retry after the first
event would show the user a second, different answer glued to the first. Retryable
failures are the ones `UpstreamHTTPError.retryable` names (408, 429, 5xx, connect
failures, timeouts); other 4xx are the caller's fault and fail at once. Waits honour
`Retry-After`; an upstream that asks for a longer wait than `UPSTREAM_MAX_RETRY_AFTER`
fails at once with an error naming the wait (retrying sooner than asked would only be
refused again). Backoff waits never pass the cap, nor the overall deadline.
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
    (event-loop time); `wait_too_long(...)` when the upstream asks for a wait over the cap.
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
            if yielded or not exc.retryable:
                raise
            if exc.retry_after is not None and exc.retry_after > settings.UPSTREAM_MAX_RETRY_AFTER:
                raise wait_too_long(exc) from exc
            delay = retry_delay(exc, attempt_number=attempt_number)
            if attempt_number >= settings.UPSTREAM_MAX_RETRIES or loop.time() + delay >= deadline:
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
    """`Retry-After` when given (`retrying` refuses one over the cap), else jittered
    exponential backoff up to the cap."""
    if exc.retry_after is not None:
        return exc.retry_after
    backoff: float = min(settings.UPSTREAM_MAX_RETRY_AFTER, BACKOFF_BASE_SECONDS * 2**attempt_number)
    return backoff * random.uniform(0.5, 1.0)


def wait_too_long(exc: UpstreamHTTPError) -> UpstreamHTTPError:
    """The failure to report when the upstream asks to wait longer than we retry after."""
    assert exc.retry_after is not None
    return UpstreamHTTPError(
        f"The upstream answered {exc.status} and asked to wait {_duration(exc.retry_after)} before "
        f"trying again, longer than the playground waits ({_duration(settings.UPSTREAM_MAX_RETRY_AFTER)}), "
        "so it was not retried. Try again after that wait.",
        status=exc.status,
        code="retry_after_too_long",
        retry_after=exc.retry_after,
        request_id=exc.request_id,
    )


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:g} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
