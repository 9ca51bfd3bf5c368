"""The context window a model has on a connection (`providers.context_windows`): the one its model
list states (the real engine's, an OpenAI-compatible server's stored by "Test connection"), else
the catalogue's; and what reads it: Settings' max_tokens, the runway."""

from __future__ import annotations

import pytest
from django.conf import LazySettings
from django.urls import reverse
from django.utils import timezone

from playground.catalog.models import PriceCard
from playground.catalog.seed import ENGINE_MODEL_ID, KIMI_K26
from playground.chat.services.conversations import conversation_create
from playground.providers.context_windows import ContextWindow, context_window_for
from playground.providers.models import ProviderConnection
from playground.providers.services import connection_engine_ensure
from playground.usage.insights.runway_selectors import conversation_runway
from playground.usage.models import UsageRecord, UsageSource, UsageStatus
from tests.fakes.upstream import FakeUpstream, json_reply
from tests.support.actors import Actors
from tests.support.clients import client_for
from tests.support.engine import GEMMA

pytestmark = pytest.mark.django_db

TEST_CONTEXT = 2048  # the test engine's --context-size


def connection_tested(actors: Actors, connection: ProviderConnection) -> str:
    page = client_for(actors.admin).post(f"/teams/{actors.team.pk}/connections/{connection.pk}/test/")
    return page.content.decode()


def window(connection: ProviderConnection | None, model_id: str) -> ContextWindow | None:
    return context_window_for(connection=connection, model_id=model_id, day=timezone.now().date())


def test_an_openai_compatible_test_keeps_the_windows_its_list_states(
    actors: Actors, openai_connection: ProviderConnection, fake_upstream: FakeUpstream
) -> None:
    listing = {
        "object": "list",
        "data": [
            {"id": "served/router", "context_length": 131_072},  # OpenRouter's field
            {"id": "served/vllm", "max_model_len": 32_768},  # vLLM's
            {"id": KIMI_K26},  # none stated: the catalogue's stands
            {"id": "served/odd", "context_length": "big"},  # not a number: none
        ],
    }
    fake_upstream.script(json_reply(listing))

    page = connection_tested(actors, openai_connection)

    openai_connection.refresh_from_db()
    assert openai_connection.listed_windows == {"served/router": 131_072, "served/vllm": 32_768}
    assert "131,072-token window" in page and "32,768-token window" in page
    assert window(openai_connection, "served/router") == ContextWindow(131_072, served=True)
    assert window(openai_connection, KIMI_K26) == ContextWindow(262_144, served=False)
    assert window(openai_connection, "served/odd") is None  # neither the list nor the catalogue knows it
    assert window(None, KIMI_K26) == ContextWindow(262_144, served=False)  # a deleted connection


def test_the_engine_window_is_the_one_it_serves_asked_without_a_test(
    actors: Actors, served_engine: ProviderConnection
) -> None:
    """The catalogue says SmolLM2 reads 8,192 tokens (its trained context); this engine loaded 2,048."""
    assert window(served_engine, ENGINE_MODEL_ID) == ContextWindow(TEST_CONTEXT, served=True)
    assert window(served_engine, GEMMA) == ContextWindow(TEST_CONTEXT, served=True)

    page = connection_tested(actors, served_engine)

    served_engine.refresh_from_db()
    assert served_engine.listed_windows == {ENGINE_MODEL_ID: TEST_CONTEXT, GEMMA: TEST_CONTEXT}
    assert "2,048-token window" in page


def test_an_engine_that_does_not_answer_leaves_its_last_test_then_the_catalogue(
    actors: Actors, settings: LazySettings, catalogue: None
) -> None:
    settings.ENGINE_URL = "http://127.0.0.1:9"  # nothing listens there
    engine = connection_engine_ensure(team=actors.team)

    assert window(engine, ENGINE_MODEL_ID) == ContextWindow(8192, served=False)
    engine.listed_windows = {ENGINE_MODEL_ID: 4096}
    assert window(engine, ENGINE_MODEL_ID) == ContextWindow(4096, served=True)


def test_settings_limit_max_tokens_to_the_window_as_served(
    actors: Actors, served_engine: ProviderConnection
) -> None:
    conversation = conversation_create(
        user=actors.owner, connection_id=served_engine.pk, model_id=ENGINE_MODEL_ID
    )

    page = client_for(actors.owner).get(reverse("chat:conversation-detail", args=[conversation.pk]))
    settings_saved = client_for(actors.owner).post(
        reverse("chat:conversation-composer", args=[conversation.pk]),
        {"max_tokens": 4000, "response_format": "text"},
    )

    assert "Up to 2,048 (the model&#x27;s context window, as served)." in page.content.decode()
    assert "at most 2,048: the model&#x27;s context window" in settings_saved.content.decode()


def test_the_runway_runs_to_the_window_the_connection_serves(
    actors: Actors, openai_connection: ProviderConnection
) -> None:
    openai_connection.listed_models, openai_connection.listed_windows = [KIMI_K26], {KIMI_K26: 16_000}
    openai_connection.save()
    conversation = conversation_create(
        user=actors.owner, connection_id=openai_connection.pk, model_id=KIMI_K26
    )
    card = PriceCard.objects.filter(model__model_id=KIMI_K26, team__isnull=True).latest("effective_from")
    for prompt, source in ((1000, UsageSource.PROVIDER), (2000, UsageSource.ESTIMATED)):
        UsageRecord.objects.create(
            team_id=conversation.team_id,
            connection=openai_connection,
            model_id=KIMI_K26,
            conversation_id=conversation.pk,
            status=UsageStatus.OK,
            prompt_tokens=prompt,
            completion_tokens=100,
            usage_source=source,
            price_card=card,
        )

    runway = conversation_runway(team_id=conversation.team_id, conversation_id=conversation.pk)
    page = client_for(actors.owner).get(reverse("chat:conversation-detail", args=[conversation.pk]))

    assert runway is not None
    assert (runway.context_window, runway.window_source, runway.estimated) == (16_000, "as served", True)
    assert runway.turns_left == (16_000 - 100 - 2000) // 1000  # not the catalogue's 262,144
    assert "turns left before the 16k context window (as served)" in page.content.decode()
