"""The conversation list in keyset pages: the newest 50, then "Older conversations" and back,
for the owner, a teammate in two teams, and never another team's conversations."""

from __future__ import annotations

import base64
import datetime as dt
import re

import pytest
from django.contrib.auth.models import AnonymousUser, User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from playground.accounts.models import Membership, Role, Team
from playground.chat.models import Conversation
from playground.chat.registries.presets import ConversationPresets
from playground.chat.selectors import conversation_count_capped, conversation_cursor, conversation_page
from tests.support.actors import Actors
from tests.support.clients import client_for

pytestmark = pytest.mark.django_db

LIST_URL = reverse("chat:conversation-list")
CARD = re.compile(r'href="/chat/(\d+)/"')
OLDER = re.compile(r'href="\?(after=[^"]+)" rel="next">Older conversations')


def conversations_of(team: Team, user: User, count: int, *, start: dt.datetime, prefix: str) -> list[int]:
    """`count` conversations, one a minute back from `start`, every third minute shared by
    three of them (ties on updated_at, which only the id orders); their ids, newest first."""
    made = Conversation.objects.bulk_create(
        Conversation(team=team, user=user, model_id="m", title=f"{prefix} {i}") for i in range(count)
    )
    for i, conversation in enumerate(made):
        when = start - dt.timedelta(minutes=i // 3)
        Conversation.objects.filter(pk=conversation.pk).update(updated_at=when)
    rows = Conversation.objects.filter(pk__in=[c.pk for c in made]).values_list("updated_at", "pk")
    return [pk for _, pk in sorted(rows, reverse=True)]


def listed_ids(content: str) -> list[int]:
    return [int(pk) for pk in CARD.findall(content)]


def walk(client: Client) -> list[list[int]]:
    """Every page from the first, following "Older conversations" until it is gone."""
    pages = []
    url = LIST_URL
    for _ in range(100):
        response = client.get(url)
        assert response.status_code == 200
        content = response.content.decode()
        pages.append(listed_ids(content))
        older = OLDER.search(content)
        if older is None:
            return pages
        url = f"{LIST_URL}?{older.group(1).replace('&amp;', '&')}"
    raise AssertionError("the Older link never ended")


def test_the_first_page_shows_the_newest_fifty_newest_first(actors: Actors) -> None:
    newest_first = conversations_of(actors.team, actors.owner, 120, start=timezone.now(), prefix="Chat")

    content = client_for(actors.owner).get(LIST_URL).content.decode()

    assert listed_ids(content) == newest_first[:50]
    assert "120 in your teams" in content
    assert OLDER.search(content) is not None
    assert "← Newest" not in content  # already there


def test_older_pages_follow_without_duplicates_or_gaps(actors: Actors) -> None:
    newest_first = conversations_of(actors.team, actors.owner, 120, start=timezone.now(), prefix="Chat")

    pages = walk(client_for(actors.owner))

    assert [len(page) for page in pages] == [50, 50, 20]
    assert [pk for page in pages for pk in page] == newest_first


def test_later_pages_link_back_to_the_newest_and_the_last_says_it_is_the_end(actors: Actors) -> None:
    conversations_of(actors.team, actors.owner, 60, start=timezone.now(), prefix="Chat")
    client = client_for(actors.owner)
    older = OLDER.search(client.get(LIST_URL).content.decode())
    assert older is not None

    last = client.get(f"{LIST_URL}?{older.group(1)}").content.decode()

    assert f'href="{LIST_URL}">← Newest</a>' in last
    assert OLDER.search(last) is None
    assert "End of your teams' conversations." in last
    assert len(listed_ids(last)) == 10


def test_a_short_list_has_no_pager(actors: Actors) -> None:
    conversations_of(actors.team, actors.owner, 3, start=timezone.now(), prefix="Chat")

    content = client_for(actors.owner).get(LIST_URL).content.decode()

    assert len(listed_ids(content)) == 3
    assert 'class="pager"' not in content


def test_another_teams_conversations_never_appear_on_any_page(actors: Actors) -> None:
    now = timezone.now()
    ours = conversations_of(actors.team, actors.owner, 70, start=now - dt.timedelta(hours=1), prefix="Ours")
    # The outsider's are all newer than ours: a scope slip would put them on the first page.
    theirs = conversations_of(actors.other_team, actors.outsider, 70, start=now, prefix="Theirs")

    for user in (actors.owner, actors.teammate):
        pages = walk(client_for(user))
        assert [pk for page in pages for pk in page] == ours
    outsider_pages = walk(client_for(actors.outsider))
    assert [pk for page in outsider_pages for pk in page] == theirs


def test_an_outsiders_cursor_shows_only_the_users_own_teams(actors: Actors) -> None:
    now = timezone.now()
    ours = conversations_of(actors.team, actors.owner, 10, start=now - dt.timedelta(days=2), prefix="Ours")
    theirs = conversations_of(actors.other_team, actors.outsider, 10, start=now, prefix="Theirs")
    cursor = conversation_cursor(Conversation.objects.get(pk=theirs[0]))

    content = client_for(actors.owner).get(LIST_URL, {"after": cursor}).content.decode()

    assert listed_ids(content) == ours
    assert "Theirs" not in content


def test_a_member_of_two_teams_gets_both_merged_in_order_across_pages(actors: Actors) -> None:
    Membership.objects.create(team=actors.other_team, user=actors.teammate, role=Role.MEMBER)
    start = timezone.now()
    alpha = conversations_of(actors.team, actors.owner, 65, start=start, prefix="Alpha")
    # Half a minute apart from Alpha's, so the two teams interleave down the whole list.
    bravo = conversations_of(
        actors.other_team, actors.outsider, 65, start=start - dt.timedelta(seconds=30), prefix="Bravo"
    )
    both = Conversation.objects.filter(pk__in=alpha + bravo).values_list("updated_at", "pk")
    newest_first = [pk for _, pk in sorted(both, reverse=True)]

    pages = walk(client_for(actors.teammate))

    assert [len(page) for page in pages] == [50, 50, 30]
    assert [pk for page in pages for pk in page] == newest_first
    assert set(pages[0]) & set(alpha) and set(pages[0]) & set(bravo)


@pytest.mark.parametrize(
    "cursor",
    [
        "not-a-cursor",
        "%%%",
        base64.urlsafe_b64encode(b"2026-01-01T00:00:00,5").decode(),  # no time zone
        base64.urlsafe_b64encode(b"2026-01-01T00:00:00+00:00,-5").decode(),  # no such id
        base64.urlsafe_b64encode(b"2026-01-01T00:00:00+00:00,5 OR 1=1").decode(),
        base64.urlsafe_b64encode(b"yesterday,5").decode(),
        base64.urlsafe_b64encode(b"\xff\xfe,5").decode(),
        "A" * 500,
    ],
)
def test_a_garbled_or_forged_cursor_is_a_clear_400(actors: Actors, cursor: str) -> None:
    conversations_of(actors.team, actors.owner, 60, start=timezone.now(), prefix="Chat")

    response = client_for(actors.owner).get(LIST_URL, {"after": cursor})

    assert response.status_code == 400
    page = response.content.decode()
    assert "That page link is not valid" in page and "/chat/" in page
    # The app's own error page (its top bar, its card), not a bare line of text in the tab.
    assert "error-card" in page and "Error 400" in page and 'class="topbar' in page


def test_a_cursor_past_the_oldest_shows_no_older_conversations(actors: Actors) -> None:
    conversations_of(actors.team, actors.owner, 5, start=timezone.now(), prefix="Chat")
    cursor = base64.urlsafe_b64encode(b"2000-01-01T00:00:00+00:00,1").decode()

    content = client_for(actors.owner).get(LIST_URL, {"after": cursor}).content.decode()

    assert listed_ids(content) == []
    assert "No older conversations" in content
    assert "No conversations yet" not in content
    assert f'href="{LIST_URL}">← Newest</a>' in content


def test_the_list_the_sidebar_and_the_presets_read_conversations_with_a_limit(actors: Actors) -> None:
    newest_first = conversations_of(actors.team, actors.owner, 60, start=timezone.now(), prefix="Chat")
    client = client_for(actors.owner)

    with CaptureQueriesContext(connection) as queries:
        client.get(LIST_URL)
        detail = client.get(reverse("chat:conversation-detail", args=[newest_first[0]])).content.decode()
        choices = ConversationPresets().choices(user=actors.owner, limit=20)

    reads = [q["sql"] for q in queries.captured_queries if 'FROM "chat_conversation"' in q["sql"]]
    assert reads
    assert all("LIMIT" in sql for sql in reads), [sql for sql in reads if "LIMIT" not in sql]
    sidebar = [int(pk) for pk in re.findall(r'id="sidebar-conversation-(\d+)"', detail)]
    assert sidebar == newest_first[:50]
    assert [pk for pk, _ in choices] == newest_first[:20]


def test_the_count_stops_at_the_cap(actors: Actors) -> None:
    conversations_of(actors.team, actors.owner, 30, start=timezone.now(), prefix="Chat")

    assert conversation_count_capped(user=actors.owner, cap=10) == 11
    assert conversation_count_capped(user=actors.owner, cap=100) == 30
    assert conversation_count_capped(user=actors.outsider, cap=100) == 0


def test_a_page_is_empty_for_an_anonymous_user(actors: Actors) -> None:
    conversations_of(actors.team, actors.owner, 3, start=timezone.now(), prefix="Chat")

    page = conversation_page(user=AnonymousUser())

    assert page.conversations == [] and page.next_cursor == ""
