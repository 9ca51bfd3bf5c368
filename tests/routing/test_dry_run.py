"""A dry run: the matching rule, each target's estimated cost at its own price card (an
unpriced one says so), and what a session loses in cached tokens when it would move."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.utils import timezone

from playground.providers.models import ProviderConnection
from playground.providers.usage_normalize import NormalizedUsage
from playground.routing.dry_run import SampleRequest, SessionMove, routing_dry_run
from playground.routing.plan import Target
from playground.routing.services import routing_policy_save
from playground.usage.models import UsageRecord
from playground.usage.pricing import cost_for
from playground.usage.records import price_card_known
from tests.routing.conftest import KIMI, LLAMA
from tests.support.actors import Actors

pytestmark = pytest.mark.django_db

CHEAP = "@cf/openai/gpt-oss-20b"
UNPRICED = LLAMA  # the catalogue has no price card for it


@pytest.fixture
def policy(actors: Actors, primary: ProviderConnection, backup: ProviderConnection) -> None:
    routing_policy_save(
        team=actors.team,
        document={
            "rules": [
                {
                    "name": "chat",
                    "targets": [
                        {"connection": "Primary", "model": KIMI},
                        {"connection": "Backup", "model": UNPRICED},
                        {"connection": "Backup", "model": CHEAP},
                    ],
                }
            ]
        },
        user=actors.owner,
    )


def test_each_target_is_estimated_at_its_own_card_and_an_unpriced_one_says_so(
    actors: Actors, primary: ProviderConnection, policy: None
) -> None:
    result = routing_dry_run(
        team_id=actors.team.pk,
        default=Target(primary.pk, primary.name, KIMI),
        sample=SampleRequest(model=KIMI, prompt_tokens=12_000, completion_tokens=800),
    )
    assert result.plan is not None and result.plan.rule == "chat"
    assert [estimate.target.label for estimate in result.estimates] == [
        f"Primary/{KIMI}",
        f"Backup/{UNPRICED}",
        f"Backup/{CHEAP}",
    ]
    usage = NormalizedUsage(prompt_tokens=12_000, completion_tokens=800)
    today = timezone.now().date()
    for estimate, model in ((result.estimates[0], KIMI), (result.estimates[2], CHEAP)):
        card = price_card_known(model_id=model, day=today, team_id=actors.team.pk).card
        assert card is not None
        assert estimate.cost == cost_for(usage=usage, card=card).total > 0
    assert result.estimates[1].cost is None and result.estimates[1].price_label == ""
    assert result.session_move is None


def test_a_session_that_last_ran_elsewhere_loses_its_prefix_at_the_new_targets_cache_discount(
    actors: Actors, primary: ProviderConnection, backup: ProviderConnection, policy: None
) -> None:
    def last_ran_on(connection: ProviderConnection) -> None:
        UsageRecord.objects.create(
            team=actors.team,
            connection=connection,
            model_id=KIMI,
            session="s-1",
            status="ok",
            prompt_tokens=30_000,
            completion_tokens=2_000,
        )

    def move(session: str) -> SessionMove | None:
        return routing_dry_run(
            team_id=actors.team.pk,
            default=Target(primary.pk, primary.name, KIMI),
            sample=SampleRequest(model=KIMI, session=session),
        ).session_move

    last_ran_on(backup)
    moved = move("s-1")
    card = price_card_known(model_id=KIMI, day=timezone.now().date(), team_id=actors.team.pk).card
    assert card is not None and card.input_per_m > card.effective_cached_input_per_m
    assert moved is not None
    assert (moved.previous, moved.tokens) == (f"Backup/{KIMI}", 32_000)
    assert moved.usd == Decimal(32_000) * (card.input_per_m - card.effective_cached_input_per_m) / 1_000_000
    last_ran_on(primary)
    assert move("s-1") is None, "the session's last request went where this one would"
    assert move("never-seen") is None
