"""Prompt variables in compare (issue 36): a comparison takes its source's variables with the
form's values over them, a blank page's system prompt declares its own, an unfilled one is refused
once for the form and nothing is stored, and every column's request is filled (the records' values
are checked in the Chromium test `tests/browser/test_variables.py`)."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from playground.catalog.seed import KIMI_K26
from playground.chat.compare.models import Comparison
from playground.chat.compare.services import Target, comparison_create, comparison_request_build
from playground.chat.models import Conversation
from playground.providers.models import ProviderConnection
from tests.support.actors import Actors
from tests.support.clients import client_for

pytestmark = pytest.mark.django_db

VARIABLES = [
    {"name": "customer", "type": "text", "value": "Ada"},
    {"name": "seats", "type": "number", "value": "3"},
]


def targets(connection: ProviderConnection) -> list[Target]:
    return [Target(connection.pk, KIMI_K26, {"temperature": 0.2}), Target(connection.pk, KIMI_K26)]


def test_a_conversations_variables_with_the_forms_values_fill_every_columns_request(
    actors: Actors, workers_connection: ProviderConnection
) -> None:
    source = Conversation.objects.create(
        team=actors.team,
        user=actors.owner,
        connection=workers_connection,
        model_id=KIMI_K26,
        system_prompt="Help {{customer}} with {{seats}} seats.",
        variables=VARIABLES,
    )

    comparison = comparison_create(
        user=actors.owner,
        prompt="Hi {{customer}}",
        targets=targets(workers_connection),
        conversation_id=source.pk,
        variable_values={"customer": "Grace"},
    )

    assert comparison.variables == [{**VARIABLES[0], "value": "Grace"}, VARIABLES[1]]
    for column in comparison.columns.all():
        request = comparison_request_build(comparison=comparison, column=column, text="Bye {{customer}}")
        assert request.messages[0]["content"] == "Help Grace with 3 seats."
        assert request.messages[-1]["content"] == "Bye Grace"
        assert request.variables == {"customer": "Grace", "seats": "3"}


def test_a_blank_pages_system_prompt_declares_its_variables_and_an_unfilled_one_stores_nothing(
    actors: Actors, workers_connection: ProviderConnection
) -> None:
    with pytest.raises(ValidationError) as caught:
        comparison_create(
            user=actors.owner,
            prompt="Hello",
            system_prompt="You support {{customer}}.",
            targets=targets(workers_connection),
        )

    assert caught.value.message_dict == {
        "variables": ["Fill in {{customer}}: the prompt uses it and it has no value."]
    }
    assert not Comparison.objects.exists()

    page = client_for(actors.owner).post(
        reverse("chat:comparison-create"),
        {
            "prompt": "Hello",
            "system_prompt": "You support {{customer}}.",
            "t0-target": f"{workers_connection.pk}:{KIMI_K26}",
            "t0-use_affinity": "on",
            "t1-target": f"{workers_connection.pk}:{KIMI_K26}",
        },
    )
    assert page.status_code == 400
    body = page.content.decode()
    assert "Fill in {{customer}}: the prompt uses it and it has no value." in body
    assert 'name="var-customer"' in body  # the form now asks for it

    comparison = comparison_create(
        user=actors.owner,
        prompt="Hello",
        system_prompt="You support {{customer}}.",
        targets=targets(workers_connection),
        variable_values={"customer": "Ada"},
    )
    assert comparison.variables == [{"name": "customer", "type": "text", "value": "Ada"}]
