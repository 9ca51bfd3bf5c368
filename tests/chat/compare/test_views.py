"""Compare pages: the form (blank or from a conversation), its checks, and scoping: another
team's comparison, column or conversation is a 404 in every view, action and socket."""

from __future__ import annotations

import pytest
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.core.exceptions import PermissionDenied

from playground.catalog.seed import KIMI_K26
from playground.chat.compare.forms import target_value
from playground.chat.compare.models import Comparison, ComparisonColumn
from playground.chat.compare.runs import comparison_run_start
from playground.chat.compare.services import ComparisonNotFound, Target, comparison_create
from playground.chat.models import Conversation
from playground.providers.models import ProviderConnection
from tests.support.actors import Actors
from tests.support.clients import client_for

pytestmark = pytest.mark.django_db


def form_data(connection: ProviderConnection, **extra: str) -> dict[str, str]:
    return {
        "prompt": "Name a colour.",
        "system_prompt": "Be brief.",
        "t0-target": target_value(connection.pk, KIMI_K26),
        "t0-temperature": "0.2",
        "t0-use_affinity": "on",
        "t1-target": target_value(connection.pk, KIMI_K26),
        "t1-temperature": "0.9",
        "t1-max_tokens": "64",
        **extra,
    }


@pytest.fixture
def other_comparison(actors: Actors, other_connection: ProviderConnection) -> Comparison:
    return comparison_create(
        user=actors.outsider,
        prompt="Bravo's secret prompt",
        targets=[Target(other_connection.pk, KIMI_K26), Target(other_connection.pk, KIMI_K26)],
    )


def test_a_blank_comparison_is_stored_with_its_columns_and_opens_its_page(
    actors: Actors, workers_connection: ProviderConnection
) -> None:
    response = client_for(actors.teammate).post("/chat/compare/new/", form_data(workers_connection))

    comparison = Comparison.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/chat/compare/{comparison.pk}/"
    assert (comparison.team_id, comparison.prompt, comparison.system_prompt) == (
        actors.team.pk,
        "Name a colour.",
        "Be brief.",
    )
    first, second = comparison.columns.all()
    assert (first.parameters, first.use_affinity) == ({"temperature": 0.2}, True)
    assert (second.parameters, second.use_affinity) == ({"temperature": 0.9, "max_tokens": 64}, False)
    assert first.affinity_key != second.affinity_key
    page = client_for(actors.teammate).get(response["Location"])
    assert page.status_code == 200
    assert (
        b"Name a colour." in page.content
        and f'ws-connect="/ws/chat/compare/{comparison.pk}/"'.encode() in page.content
    )
    assert b'hx-trigger="load"' in page.content, "a comparison never run starts when its page opens"
    Comparison.objects.filter(pk=comparison.pk).update(runs=1)
    again = client_for(actors.teammate).get(response["Location"])
    assert b'hx-trigger="load"' not in again.content, "opening it again sends nothing"


def test_a_comparison_from_a_conversation_takes_its_system_prompt_tools_and_response_format(
    actors: Actors, workers_connection: ProviderConnection, conversation: Conversation
) -> None:
    conversation.tools = [
        {"type": "function", "function": {"name": "colour", "parameters": {"type": "object"}}}
    ]
    conversation.response_format = {"type": "json_object"}
    conversation.parameters = {"top_p": 0.5}
    conversation.save()
    owner = client_for(actors.owner)
    form = owner.get(f"/chat/compare/?conversation={conversation.pk}")
    assert form.status_code == 200 and b"With the setup of" in form.content
    assert f'value="{target_value(workers_connection.pk, KIMI_K26)}" selected'.encode() in form.content

    response = owner.post(
        "/chat/compare/new/",
        form_data(workers_connection, conversation=str(conversation.pk), system_prompt="x"),
    )

    assert response.status_code == 302
    comparison = Comparison.objects.get()
    assert comparison.conversation_id == conversation.pk
    assert comparison.system_prompt == "Be brief.", "the conversation's, not the typed one"
    assert comparison.tools == conversation.tools and comparison.response_format == {"type": "json_object"}
    assert comparison.columns.first().parameters == {"top_p": 0.5, "temperature": 0.2}  # type: ignore[union-attr]


def test_one_target_or_a_parameter_out_of_range_is_refused_beside_its_field(
    actors: Actors, workers_connection: ProviderConnection
) -> None:
    client = client_for(actors.teammate)
    alone = client.post("/chat/compare/new/", form_data(workers_connection, **{"t1-target": ""}))
    assert alone.status_code == 400 and b"Compare 2 to 4 targets." in alone.content
    hot = client.post("/chat/compare/new/", form_data(workers_connection, **{"t1-temperature": "9"}))
    assert hot.status_code == 400 and b"field-error" in hot.content
    assert not Comparison.objects.exists()


def test_a_viewer_cannot_start_a_comparison(actors: Actors, workers_connection: ProviderConnection) -> None:
    response = client_for(actors.viewer).post("/chat/compare/new/", form_data(workers_connection))
    assert response.status_code == 400
    assert not Comparison.objects.exists()


# --- scoping --------------------------------------------------------------------------------


def test_another_teams_comparison_is_a_404_in_every_view_and_action(
    actors: Actors, other_comparison: Comparison
) -> None:
    column = other_comparison.columns.first()
    assert column is not None
    client = client_for(actors.owner)
    assert client.get(f"/chat/compare/{other_comparison.pk}/").status_code == 404
    continued = client.post(f"/chat/compare/{other_comparison.pk}/columns/{column.pk}/continue/")
    assert continued.status_code == 404
    priced = client.post(f"/chat/compare/{other_comparison.pk}/preflight/", {"message": "Next?"})
    assert priced.status_code == 404, "its next turn's pre-flight too"
    assert b"Bravo's secret prompt" not in client.get("/chat/compare/").content, "not in the recent list"
    assert client_for(actors.outsider).get(f"/chat/compare/{other_comparison.pk}/").status_code == 200


def test_a_column_of_another_comparison_is_a_404_through_ones_own(
    actors: Actors, workers_connection: ProviderConnection, other_comparison: Comparison
) -> None:
    mine = comparison_create(
        user=actors.owner,
        prompt="Mine",
        targets=[Target(workers_connection.pk, KIMI_K26), Target(workers_connection.pk, KIMI_K26)],
    )
    theirs = ComparisonColumn.objects.filter(comparison=other_comparison).first()
    assert theirs is not None
    response = client_for(actors.owner).post(f"/chat/compare/{mine.pk}/columns/{theirs.pk}/continue/")
    assert response.status_code == 404
    assert not Conversation.objects.filter(team=actors.team).exists()


def test_another_teams_conversation_cannot_seed_a_comparison(
    actors: Actors, workers_connection: ProviderConnection, other_conversation: Conversation
) -> None:
    client = client_for(actors.owner)
    assert client.get(f"/chat/compare/?conversation={other_conversation.pk}").status_code == 404
    response = client.post(
        "/chat/compare/new/", form_data(workers_connection, conversation=str(other_conversation.pk))
    )
    assert response.status_code == 404
    priced = client.post(
        "/chat/compare/preflight/", form_data(workers_connection, conversation=str(other_conversation.pk))
    )
    assert priced.status_code == 404, "nor price a first turn with its setup"
    with pytest.raises(ComparisonNotFound):
        comparison_create(
            user=actors.owner,
            prompt="x",
            conversation_id=other_conversation.pk,
            targets=[Target(workers_connection.pk, KIMI_K26), Target(workers_connection.pk, KIMI_K26)],
        )
    assert not Comparison.objects.exists()


def test_another_teams_connection_is_no_target(
    actors: Actors, workers_connection: ProviderConnection, other_connection: ProviderConnection
) -> None:
    response = client_for(actors.owner).post(
        "/chat/compare/new/",
        form_data(workers_connection, **{"t1-target": target_value(other_connection.pk, KIMI_K26)}),
    )
    assert response.status_code == 400
    assert not Comparison.objects.exists()


@pytest.mark.django_db(transaction=True)
async def test_another_teams_comparison_socket_is_refused_like_a_404(
    other_comparison: Comparison, session_cookies: dict[str, str]
) -> None:
    from playground.asgi import application

    cookie = f"{settings.SESSION_COOKIE_NAME}={session_cookies['owner']}".encode()
    headers = [(b"origin", b"http://localhost"), (b"host", b"localhost"), (b"cookie", cookie)]
    socket = WebsocketCommunicator(application, f"/ws/chat/compare/{other_comparison.pk}/", headers=headers)
    connected, code = await socket.connect(timeout=5)
    assert (connected, code) == (False, 4404)


def test_a_viewer_sees_a_comparison_but_cannot_run_or_continue_it(
    actors: Actors, workers_connection: ProviderConnection
) -> None:
    comparison = comparison_create(
        user=actors.owner,
        prompt="Seen, not run",
        targets=[Target(workers_connection.pk, KIMI_K26), Target(workers_connection.pk, KIMI_K26)],
    )
    column = comparison.columns.first()
    assert column is not None
    viewer = client_for(actors.viewer)
    page = viewer.get(f"/chat/compare/{comparison.pk}/")
    assert page.status_code == 200 and b"Seen, not run" in page.content
    assert b"ws-connect" not in page.content and b"Rerun last turn" not in page.content
    assert b'id="compare-composer"' not in page.content, "no box to send the next turn from"
    with pytest.raises(PermissionDenied):
        comparison_run_start(user=actors.viewer, comparison_id=comparison.pk, first=True)
    assert viewer.post(f"/chat/compare/{comparison.pk}/columns/{column.pk}/continue/").status_code == 403
