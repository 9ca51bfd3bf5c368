"""What writes no usage record is counted where it happens: a rate limit's refusal (a gateway key's,
a chat user's) and a routing target put in cooldown."""

from __future__ import annotations

import asyncio
import random
import uuid

import pytest
from django.conf import LazySettings

from playground.chat.limits import TurnRefused, turn_admit
from playground.gateway.errors import GatewayError
from playground.gateway.ratelimits import rate_admit_many
from playground.routing.cooldown import target_failed
from playground.routing.plan import Cooldown, Target
from playground.usage.api_keys import api_key_issue
from tests.support.actors import Actors
from tests.support.metrics import scrape_counters

REFUSALS = "playground_rate_limit_refusals_total"


@pytest.mark.django_db
def test_a_gateway_keys_refused_requests_are_counted(actors: Actors) -> None:
    key, _ = api_key_issue(
        team_id=actors.team.pk,
        name="ci",
        connection_id=None,
        created_by_id=actors.owner.pk,
        requests_per_minute=2,
    )
    key.prefix = uuid.uuid4().hex[:10]  # a counter of its own (the storage outlives test databases)
    before = scrape_counters().value(REFUSALS, scope="gateway", limit="requests")

    states = rate_admit_many([key] * 5)

    assert sum(isinstance(state, GatewayError) for state in states) == 3
    assert scrape_counters().value(REFUSALS, scope="gateway", limit="requests") - before == 3


async def test_a_chat_users_refused_turns_are_counted_by_the_limit_that_refused(
    settings: LazySettings,
) -> None:
    settings.CHAT_TURNS_PER_MINUTE, settings.CHAT_MAX_CONCURRENT_TURNS = 1, 1
    user_id = random.randrange(10**9, 10**12)  # counters of its own in the process's limiter
    before = scrape_counters()

    slot = await turn_admit(user_id=user_id)
    with pytest.raises(TurnRefused, match="already have 1 answer streaming"):
        await turn_admit(user_id=user_id)
    await slot.release()
    with pytest.raises(TurnRefused, match="You have sent 1 messages this minute"):
        await turn_admit(user_id=user_id)

    after = scrape_counters()
    for limit in ("concurrent_turns", "turns"):
        assert (
            after.value(REFUSALS, scope="chat", limit=limit)
            - before.value(REFUSALS, scope="chat", limit=limit)
            == 1
        )


def test_a_target_put_in_cooldown_is_counted_once() -> None:
    target = Target(connection_id=random.randrange(10**6, 10**9), connection_name="Primary", model="m-1")
    labels = {"connection": str(target.connection_id), "model": "m-1"}

    cooled = [asyncio.run(target_failed(target, Cooldown(failures=2, seconds=60))) for _ in range(2)]

    assert cooled == [False, True]
    assert scrape_counters().value("playground_routing_cooldowns_total", **labels) == 1
