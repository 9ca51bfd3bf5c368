"""The per-user turn limits hold however many other users are counted at the same time."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine
from django.conf import LazySettings

from playground.chat.limits import TurnRefused, turn_admit


async def test_a_users_count_this_minute_survives_a_thousand_other_users_counted_meanwhile(
    settings: LazySettings,
) -> None:
    """The embedded profile's in-process cache once kept 300 entries: every key past that
    evicted a third of them, so counts of active users were lost (and one evicted between
    its `add` and `incr` failed the turn)."""
    settings.CHAT_TURNS_PER_MINUTE = 3
    with time_machine.travel(dt.datetime(2026, 11, 25, 12, 0, 5, tzinfo=dt.UTC), tick=False):
        for _ in range(2):
            await (await turn_admit(user_id=1)).release()
        for other in range(2, 1002):
            await (await turn_admit(user_id=other)).release()
        await (await turn_admit(user_id=1)).release()  # the third this minute

        with pytest.raises(TurnRefused, match="You have sent 3 messages this minute"):
            await turn_admit(user_id=1)
