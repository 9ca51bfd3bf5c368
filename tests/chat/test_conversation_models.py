"""A conversation on a connection that lists its models names one of them, or is refused at creation."""

from __future__ import annotations

import re

import pytest
from django.conf import LazySettings
from django.core.exceptions import ValidationError
from django.urls import reverse

from playground.catalog.seed import ENGINE_MODEL_ID, KIMI_K26
from playground.chat.models import Conversation
from playground.chat.services.conversations import conversation_create
from playground.providers.models import ProviderConnection
from playground.providers.services import connection_models_store
from tests.fakes.upstream import FakeUpstream, JsonReply, json_reply
from tests.support.actors import Actors
from tests.support.clients import client_for

pytestmark = pytest.mark.django_db


def models(*ids: str) -> JsonReply:
    return json_reply({"object": "list", "data": [{"id": model_id, "object": "model"} for model_id in ids]})


def test_the_engine_refuses_a_model_id_it_does_not_serve_with_a_form_error(
    actors: Actors, engine_connection: ProviderConnection, fake_upstream: FakeUpstream, settings: LazySettings
) -> None:
    settings.ENGINE_URL = fake_upstream.url
    fake_upstream.script(models(ENGINE_MODEL_ID))
    client = client_for(actors.owner)

    response = client.post(
        reverse("chat:conversation-create"),
        {"connection": engine_connection.pk, "custom_model_id": "@local/not-loaded"},
    )

    assert response.status_code == 400
    assert (
        f"Embedded engine does not serve @local/not-loaded: it serves {ENGINE_MODEL_ID}."
        in response.content.decode()
    )
    assert not Conversation.objects.exists()
    assert fake_upstream.requests[0].path.endswith("/ai/v1/models")


def test_the_engine_accepts_the_model_it_serves(
    actors: Actors, engine_connection: ProviderConnection, fake_upstream: FakeUpstream, settings: LazySettings
) -> None:
    settings.ENGINE_URL = fake_upstream.url
    fake_upstream.script(models(ENGINE_MODEL_ID))

    conversation = conversation_create(
        user=actors.owner, connection_id=engine_connection.pk, model_id=ENGINE_MODEL_ID
    )

    assert conversation.model_id == ENGINE_MODEL_ID


def test_a_tested_connection_keeps_its_model_list_and_refuses_other_ids(
    actors: Actors, openai_connection: ProviderConnection, fake_upstream: FakeUpstream
) -> None:
    fake_upstream.script(models("served/a", "served/b"))
    client = client_for(actors.owner)
    client.post(reverse("teams:connection-test", args=[actors.team.pk, openai_connection.pk]))
    openai_connection.refresh_from_db()
    assert openai_connection.listed_models == ["served/a", "served/b"]

    with pytest.raises(ValidationError) as refused:
        conversation_create(user=actors.owner, connection_id=openai_connection.pk, model_id="served/c")

    assert refused.value.message_dict["model_id"][0].startswith(
        "Gateway does not serve served/c: its last test listed served/a, served/b."
    )
    assert conversation_create(user=actors.owner, connection_id=openai_connection.pk, model_id="served/b")


def test_an_untested_connection_takes_any_id_it_may_take(
    actors: Actors, openai_connection: ProviderConnection, fake_upstream: FakeUpstream
) -> None:
    conversation = conversation_create(
        user=actors.owner, connection_id=openai_connection.pk, model_id="any/id"
    )

    assert conversation.model_id == "any/id" and fake_upstream.requests == []


def test_an_openai_compatible_connection_offers_what_its_test_listed_and_preselects_nothing_untested(
    actors: Actors, openai_connection: ProviderConnection, catalogue: None
) -> None:
    """Not the Workers AI catalogue, which the endpoint may not serve: once tested, its own list;
    before, the catalogue's with nothing preselected (the user picks or types the id)."""
    client = client_for(actors.owner)
    url = reverse("chat:model-options")

    untested = client.get(url, {"connection": openai_connection.pk}).content.decode()
    assert '<option value="" selected>Choose a catalogued model, or type its id below</option>' in untested
    assert f'value="{KIMI_K26}"' in untested and f'value="{KIMI_K26}" selected' not in untested

    connection_models_store(connection=openai_connection, models=["served/a", KIMI_K26])
    tested = client.get(url, {"connection": openai_connection.pk}).content.decode()
    options = re.findall(r'<option value="([^"]*)"', tested)
    assert options == ["served/a", KIMI_K26]
    assert '<option value="served/a" selected>served/a</option>' in tested  # the first it serves
    assert f'<option value="{KIMI_K26}">Kimi K2.6</option>' in tested  # named as the catalogue names it

    refused = client.post(
        reverse("chat:conversation-create"),
        {"connection": openai_connection.pk, "model_id": "@cf/meta/llama-4-scout-17b-16e-instruct"},
    )
    assert refused.status_code == 400 and "Choose one of the models this connection serves." in refused.text
    made = client.post(
        reverse("chat:conversation-create"), {"connection": openai_connection.pk, "model_id": "served/a"}
    )
    assert made.status_code == 302 and Conversation.objects.get().model_id == "served/a"
