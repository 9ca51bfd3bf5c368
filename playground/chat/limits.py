"""Per-user limits on chat turns, shared by every socket and process of a user.

Both are counted where every web process sees them (Redis in the production profile; process
memory in the embedded profile, which runs one web process):

- a turn rate: at most `CHAT_TURNS_PER_MINUTE` turns started per user a minute, on the
  limiter the gateway's keys use too (`lib.ratelimit`);
- concurrent turns: at most `CHAT_MAX_CONCURRENT_TURNS` answers streaming per user, across
  tabs, in the Django cache. Each running turn holds one of that many slot keys, taken with
  an atomic `add` and deleted when the turn ends; a slot left by a crashed process expires
  after the longest a turn can last.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache

from playground.lib.asyncutil import finish_even_if_cancelled
from playground.lib.metrics import RATE_LIMIT_REFUSALS
from playground.lib.ratelimit import MinuteLimit, seconds_left

SLOT_GRACE_SECONDS = 60


class TurnRefused(Exception):
    """A turn the limits refuse; the message says why and what to do."""


@dataclass(frozen=True)
class TurnSlot:
    """One of the user's concurrent-turn slots, held while a turn runs."""

    key: str
    token: str

    async def release(self) -> None:
        """Free the slot, to the end even if the caller is cancelled meanwhile: it runs in
        `finally` blocks that a Stop or a disconnect cancels, and a lost release would
        hold the slot until it expires."""
        await finish_even_if_cancelled(self._delete())

    async def _delete(self) -> None:
        if await cache.aget(self.key) == self.token:
            await cache.adelete(self.key)


async def turn_admit(*, user_id: int) -> TurnSlot:
    """Take a concurrent-turn slot and count the turn against the rate; raises `TurnRefused`."""
    slot = await _slot_take(user_id=user_id)
    try:
        await _rate_count(user_id=user_id)
    except TurnRefused:
        await slot.release()
        raise
    return slot


async def _slot_take(*, user_id: int) -> TurnSlot:
    limit = settings.CHAT_MAX_CONCURRENT_TURNS
    token = uuid.uuid4().hex
    timeout = settings.UPSTREAM_TOTAL_TIMEOUT + SLOT_GRACE_SECONDS
    for index in range(limit):
        key = f"chat:turn-slot:{user_id}:{index}"
        if await cache.aadd(key, token, timeout=timeout):
            return TurnSlot(key=key, token=token)
    RATE_LIMIT_REFUSALS.labels("chat", "concurrent_turns").inc()
    raise TurnRefused(
        f"You already have {limit} answer{'s' if limit != 1 else ''} streaming (in this or other tabs). "
        "Wait for one to finish, or stop it, then send again."
    )


async def _rate_count(*, user_id: int) -> None:
    limit = settings.CHAT_TURNS_PER_MINUTE
    refused = await MinuteLimit("chat", "turns", limit).ahit(str(user_id))
    if refused is not None:
        RATE_LIMIT_REFUSALS.labels("chat", "turns").inc()
        raise TurnRefused(
            f"You have sent {limit} messages this minute, the most allowed. "
            f"Try again in {seconds_left(refused.reset_time)} s."
        )
