"""Conversation search on the profile's database (SQLite's FTS5 by default, PostgreSQL's GIN
indexes with DATABASE_URL): what matches, scoping to the user's teams, an index that follows
every write, the list's search box and the quick switcher."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import connection
from django.urls import reverse
from django.utils import timezone

from playground.accounts.models import Membership, Role, Team
from playground.chat import selectors
from playground.chat.models import Conversation, Message, MessageRole
from playground.chat.search.index import search_index_drop, search_index_ensure
from playground.chat.search.matching import search_terms
from playground.chat.selectors import conversation_search
from tests.support.actors import Actors
from tests.support.clients import client_for

pytestmark = pytest.mark.django_db

LIST_URL = "/chat/"
RESULTS = {"HX-Request": "true", "HX-Target": "conversation-results"}


@pytest.fixture(autouse=True, params=["newest checked", "index"])
def search_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test runs both ways a search is answered (`conversation_search`): from the newest
    conversations checked directly (a test's few are all of them), and from the full-text index
    (asked whenever fewer than a page match among the newest, here the newest one)."""
    if request.param == "index":
        monkeypatch.setattr(selectors, "RECENT_CHECKED", 1)
    return str(request.param)


def chat(team: Team, actors: Actors, title: str, *turns: str) -> Conversation:
    conversation = Conversation.objects.create(team=team, user=actors.owner, model_id="m", title=title)
    for index, text in enumerate(turns):
        role = MessageRole.USER if index % 2 == 0 else MessageRole.ASSISTANT
        Message.objects.create(conversation=conversation, role=role, content=text)
    return conversation


def found(actors: Actors, text: str, user: str = "owner") -> list[int]:
    return [c.pk for c in conversation_search(user=getattr(actors, user), text=text).conversations]


def test_a_word_of_an_answer_finds_its_conversation_and_only_it(actors: Actors) -> None:
    wanted = chat(
        actors.team, actors, "Geography", "What is the capital of Finland?", "The capital is Helsinki."
    )
    chat(actors.team, actors, "Cooking", "How long do eggs boil?", "About nine minutes.")

    assert found(actors, "helsinki") == [wanted.pk]
    assert found(actors, "HELSINKI") == [wanted.pk]  # case does not matter
    assert found(actors, "helsin") == [wanted.pk]  # a word as it is being typed
    assert found(actors, "geography") == [wanted.pk]  # the title
    assert found(actors, "finland capital") == [wanted.pk]  # every word, in one message
    assert found(actors, "helsinki eggs") == []  # not in the title nor in one message together
    assert found(actors, "oslo") == []


def test_punctuation_and_search_syntax_are_read_as_words_not_as_commands(actors: Actors) -> None:
    wanted = chat(actors.team, actors, "", "Mail me at ops@example.com", 'He said "NEAR" (twice) OR not*')

    assert found(actors, '"near" OR twice*') == [wanted.pk]
    assert found(actors, "example.com") == [wanted.pk]
    assert found(actors, "!!! ??? ''") == []
    assert found(actors, "") == []
    assert search_terms("A  b_c, A! d'e") == ["a", "b", "c", "d", "e"]


def test_another_teams_conversations_are_never_found_and_every_team_of_the_user_is_searched(
    actors: Actors,
) -> None:
    ours = chat(actors.team, actors, "", "Quarterly zeppelin report")
    theirs = chat(actors.other_team, actors, "", "Quarterly zeppelin report")

    assert found(actors, "zeppelin") == [ours.pk]
    assert found(actors, "zeppelin", user="outsider") == [theirs.pk]
    Membership.objects.create(team=actors.other_team, user=actors.owner, role=Role.VIEWER)
    assert set(found(actors, "zeppelin")) == {ours.pk, theirs.pk}


def test_the_index_follows_new_messages_renames_edits_and_deletions(actors: Actors) -> None:
    conversation = chat(actors.team, actors, "Old name", "Hello")
    assert found(actors, "marzipan") == []

    Message.objects.create(conversation=conversation, role=MessageRole.ASSISTANT, content="Marzipan, then.")
    assert found(actors, "marzipan") == [conversation.pk]

    conversation.title = "Almond paste"
    conversation.save()
    assert found(actors, "almond") == [conversation.pk]
    assert found(actors, "old name") == []

    Message.objects.filter(conversation=conversation, content="Hello").update(content="Greetings")
    assert found(actors, "greetings") == [conversation.pk]
    assert found(actors, "hello") == []

    conversation.delete()
    assert found(actors, "marzipan") == []
    assert found(actors, "almond") == []


def test_an_index_that_went_missing_is_rebuilt_with_what_was_written_meanwhile(actors: Actors) -> None:
    """A table rebuilt by a later migration loses its SQLite triggers; `migrate` ensures them again."""
    search_index_drop(connection)
    conversation = chat(actors.team, actors, "Written while the index was away", "Pomegranate")
    if connection.vendor == "postgresql":  # migrate runs outside a transaction: no checks pending
        with connection.cursor() as cursor:
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")

    created = search_index_ensure(connection)

    assert created
    assert search_index_ensure(connection) == []  # in place: nothing to do
    assert found(actors, "pomegranate") == [conversation.pk]
    assert found(actors, "away") == [conversation.pk]


def test_results_come_newest_first_fifty_at_a_time(actors: Actors) -> None:
    now = timezone.now()
    made = [chat(actors.team, actors, f"Ticket {n}", "printer jam again") for n in range(55)]
    for n, conversation in enumerate(made):
        Conversation.objects.filter(pk=conversation.pk).update(updated_at=now - dt.timedelta(minutes=n))

    first = conversation_search(user=actors.owner, text="printer")
    second = conversation_search(user=actors.owner, text="printer", cursor=first.next_cursor)

    assert [c.pk for c in first.conversations] == [c.pk for c in made[:50]]
    assert [c.pk for c in second.conversations] == [c.pk for c in made[50:]]
    assert second.next_cursor == ""


def test_the_search_box_answers_htmx_with_the_results_alone_and_a_link_with_the_whole_page(
    actors: Actors,
) -> None:
    wanted = chat(
        actors.team, actors, "Trip planning", "Where to stay?", "Try the harbour district in Bergen."
    )
    chat(actors.team, actors, "Other", "Nothing here")
    client = client_for(actors.teammate)

    fragment = client.get(LIST_URL, {"q": "bergen"}, headers=RESULTS).content.decode()
    page = client.get(LIST_URL, {"q": "bergen"}).content.decode()
    none = client.get(LIST_URL, {"q": "tromso"}, headers=RESULTS).content.decode()

    assert fragment.lstrip().startswith('<div id="conversation-results"')
    assert fragment.count('class="conversation-row"') == 1
    assert f'href="/chat/{wanted.pk}/"' in fragment
    assert "<!doctype html>" in page and 'value="bergen"' in page
    assert page.count('class="conversation-row"') == 1
    assert "No conversation in your teams holds “tromso”." in none


def test_the_quick_switcher_lists_recent_conversations_then_matches_in_the_users_teams(
    actors: Actors,
) -> None:
    recent = chat(actors.team, actors, "Budget review", "Numbers")
    chat(actors.other_team, actors, "Budget review elsewhere", "Numbers")
    client = client_for(actors.teammate)
    url = reverse("chat:conversation-switch")

    empty = client.get(url).content.decode()
    typed = client.get(url, {"q": "budg"}).content.decode()
    nothing = client.get(url, {"q": "zzz"}).content.decode()

    assert empty.count('role="option"') == 1
    assert f'href="/chat/{recent.pk}/"' in typed and typed.count('role="option"') == 1
    assert 'class="is-active" aria-selected="true"' in typed
    assert "elsewhere" not in typed
    assert "No conversation holds “zzz”." in nothing
