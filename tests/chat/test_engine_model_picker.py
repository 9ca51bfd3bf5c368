"""The model picker of an engine connection offers what the engine serves: the quality model,
first, where it was installed (`ENGINE_MODEL=quality`), and not where it was not."""

from __future__ import annotations

import pytest
from django.conf import LazySettings
from django.urls import reverse

from playground.catalog.seed import ENGINE_GEMMA_ID, ENGINE_MODEL_ID, ENGINE_QUALITY_ID
from playground.providers.models import ProviderConnection
from playground.providers.services import connection_engine_ensure
from tests.support.actors import Actors
from tests.support.clients import client_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def engine(actors: Actors, settings: LazySettings, catalogue: None) -> ProviderConnection:
    """An engine connection whose engine does not answer now: its last test's list stands."""
    settings.ENGINE_URL = "http://127.0.0.1:9"  # nothing listens there
    return connection_engine_ensure(team=actors.team)


def picker(actors: Actors, connection: ProviderConnection) -> str:
    page = client_for(actors.owner).get(reverse("chat:model-options"), {"connection": connection.pk})
    assert page.status_code == 200
    return page.content.decode()


def test_it_offers_the_quality_model_first_where_the_engine_serves_it(
    actors: Actors, engine: ProviderConnection
) -> None:
    engine.listed_windows = {ENGINE_MODEL_ID: 4096, ENGINE_GEMMA_ID: 4096, ENGINE_QUALITY_ID: 8192}
    engine.save()

    html = picker(actors, engine)

    assert f'<option value="{ENGINE_QUALITY_ID}" selected>' in html
    assert "Qwen2.5-Coder 1.5B Instruct (embedded engine)" in html
    assert f'<option value="{ENGINE_MODEL_ID}">' in html


def test_it_does_not_offer_the_quality_model_where_it_was_not_installed(
    actors: Actors, engine: ProviderConnection
) -> None:
    engine.listed_windows = {ENGINE_MODEL_ID: 4096, ENGINE_GEMMA_ID: 4096}
    engine.save()

    html = picker(actors, engine)

    assert ENGINE_QUALITY_ID not in html
    assert f'<option value="{ENGINE_MODEL_ID}" selected>' in html
