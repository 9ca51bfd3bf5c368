"""Branches: edit a question, regenerate an answer, switch branches, delete a turn, fork a
conversation; what goes upstream is always the branch on screen (checked at the loopback
upstream), and usage records are never deleted."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.core.exceptions import ValidationError
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.http import QueryDict
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from playground.analytics.filters import filters_from_query
from playground.analytics.selectors.conversations import top_conversations
from playground.analytics.selectors.totals import headline
from playground.catalog.seed import KIMI_K26
from playground.chat.domain.attachments import attachment_store, image_clean
from playground.chat.models import Attachment, Conversation, Message, MessageRole
from playground.chat.selectors import branch_shown, conversation_usage_so_far
from playground.chat.services.branching import (
    chat_branch_switch,
    chat_edit_start,
    chat_fork,
    chat_message_write,
    chat_regenerate_start,
    chat_turn_delete,
)
from playground.chat.services.conversations import MessageNotFound, conversation_create
from playground.chat.services.tool_continuations import ToolResultInput, chat_continue_start
from playground.chat.services.turns import ChatTurn, chat_turn_start
from playground.providers.models import ProviderConnection
from playground.usage.models import UsageRecord
from tests.fakes.upstream import FakeUpstream, error, native_frame, sse, usage
from tests.support.actors import Actors
from tests.support.clients import client_for
from tests.support.images import png
from tests.support.messages import message_append

pytestmark = pytest.mark.django_db

SCOUT = "@cf/meta/llama-4-scout-17b-16e-instruct"  # reads images, per the catalogue
CLOCK_TOOL = {"type": "function", "function": {"name": "clock", "parameters": {"type": "object"}}}


def drain(turn: ChatTurn) -> ChatTurn:
    async def run() -> None:
        async for _ in turn.events():
            pass

    async_to_sync(run)()
    return turn


def send(actors: Actors, conversation: Conversation, text: str) -> ChatTurn:
    return drain(chat_turn_start(user=actors.owner, conversation_id=conversation.pk, text=text))


def answered(actors: Actors, conversation: Conversation, text: str, upstream: FakeUpstream) -> Message:
    """Send `text`, answered "answer to <text>"; returns the question."""
    upstream.script(sse([native_frame(f"answer to {text}"), native_frame("", usage=usage(20, 4))]))
    return send(actors, conversation, text).user_message


def sent(upstream: FakeUpstream) -> list[tuple[str, Any]]:
    """(role, content) of each message the last request sent."""
    return [(m["role"], m["content"]) for m in upstream.requests[-1].json["messages"]]


def shown(conversation: Conversation) -> list[str]:
    conversation.refresh_from_db()
    return [message.content for message in branch_shown(conversation=conversation).messages]


@pytest.fixture
def three_turns(actors: Actors, conversation: Conversation, fake_upstream: FakeUpstream) -> list[Message]:
    return [answered(actors, conversation, text, fake_upstream) for text in ("One", "Two", "Three")]


# --- edit --------------------------------------------------------------------------------


def test_an_edited_early_question_is_a_new_branch_whose_history_stops_before_it(
    actors: Actors, conversation: Conversation, fake_upstream: FakeUpstream, three_turns: list[Message]
) -> None:
    one, two, _ = three_turns

    turn = drain(
        chat_edit_start(
            user=actors.owner, conversation_id=conversation.pk, message_id=two.pk, text="Two, edited"
        )
    )

    assert sent(fake_upstream) == [
        ("system", "Be brief."),
        ("user", "One"),
        ("assistant", "answer to One"),
        ("user", "Two, edited"),
    ]
    edited = turn.user_message
    assert edited.parent_id == two.parent_id and edited.pk != two.pk
    assert turn.question_siblings == [two.pk, edited.pk]
    assert shown(conversation) == ["One", "answer to One", "Two, edited", fake_upstream.default_text]
    assert Message.objects.filter(pk=two.pk).exists(), "the original branch is kept"
    assert one.pk not in turn.replaced
    assert turn.replaced[0] == two.pk and len(turn.replaced) == 4  # Two, its answer, Three, its answer


def test_the_page_shows_the_switcher_on_the_edited_question_and_switching_changes_the_next_history(
    actors: Actors, conversation: Conversation, fake_upstream: FakeUpstream, three_turns: list[Message]
) -> None:
    _, two, _ = three_turns
    edited = drain(
        chat_edit_start(
            user=actors.owner, conversation_id=conversation.pk, message_id=two.pk, text="Two again"
        )
    ).user_message
    owner = client_for(actors.owner)
    page = owner.get(reverse("chat:conversation-detail", args=[conversation.pk])).content.decode()
    assert '<span class="branch-position">2 / 2</span>' in page
    assert reverse("chat:branch-switch", args=[conversation.pk, two.pk]) in page
    assert "Three" not in page

    response = owner.post(
        reverse("chat:branch-switch", args=[conversation.pk, two.pk]), HTTP_HX_REQUEST="true"
    )

    assert response.status_code == 200
    fragment = response.content.decode()
    assert '<span class="branch-position">1 / 2</span>' in fragment and "Three" in fragment
    assert reverse("chat:branch-switch", args=[conversation.pk, edited.pk]) in fragment
    send(actors, conversation, "Four")
    assert [content for _, content in sent(fake_upstream)][1:] == [
        "One",
        "answer to One",
        "Two",
        "answer to Two",
        "Three",
        "answer to Three",
        "Four",
    ]


def test_switching_back_shows_where_that_branch_was_left(
    actors: Actors, conversation: Conversation, fake_upstream: FakeUpstream, three_turns: list[Message]
) -> None:
    two = three_turns[1]
    edited = drain(
        chat_edit_start(user=actors.owner, conversation_id=conversation.pk, message_id=two.pk, text="Other")
    ).user_message
    send(actors, conversation, "Deeper")

    chat_branch_switch(user=actors.owner, conversation_id=conversation.pk, message_id=two.pk)
    assert shown(conversation)[-2:] == ["Three", "answer to Three"]
    chat_branch_switch(user=actors.owner, conversation_id=conversation.pk, message_id=edited.pk)

    assert shown(conversation)[2:] == [
        "Other",
        fake_upstream.default_text,
        "Deeper",
        fake_upstream.default_text,
    ]


def test_the_arrows_come_back_to_the_leaf_the_user_left_not_the_newest_one(
    actors: Actors, conversation: Conversation, fake_upstream: FakeUpstream, three_turns: list[Message]
) -> None:
    """Branch A is left on the first of two answers to "Three" (the second, regenerated, is newer):
    a switch to branch B and back shows A down to that first answer."""
    two, first_answer = three_turns[1], Message.objects.get(parent=three_turns[2])
    fake_upstream.script(sse([native_frame("a newer answer"), native_frame("", usage=usage(40, 3))]))
    drain(
        chat_regenerate_start(user=actors.owner, conversation_id=conversation.pk, message_id=first_answer.pk)
    )
    chat_branch_switch(user=actors.owner, conversation_id=conversation.pk, message_id=first_answer.pk)
    assert shown(conversation)[-1] == "answer to Three"
    edited = drain(
        chat_edit_start(user=actors.owner, conversation_id=conversation.pk, message_id=two.pk, text="Other")
    ).user_message

    chat_branch_switch(user=actors.owner, conversation_id=conversation.pk, message_id=two.pk)
    assert shown(conversation)[-2:] == ["Three", "answer to Three"]
    page = client_for(actors.owner).get(reverse("chat:conversation-detail", args=[conversation.pk]))
    assert (
        page.content.decode().count('<span class="branch-position">1 / 2</span>') == 2
    )  # Two, and its answer

    chat_branch_switch(user=actors.owner, conversation_id=conversation.pk, message_id=edited.pk)
    assert shown(conversation)[-2:] == ["Other", fake_upstream.default_text]
    chat_branch_switch(user=actors.owner, conversation_id=conversation.pk, message_id=two.pk)
    assert shown(conversation)[-1] == "answer to Three"


def test_a_switch_reads_the_tree_in_the_same_queries_however_long_the_conversation(
    actors: Actors, conversation: Conversation, fake_upstream: FakeUpstream, three_turns: list[Message]
) -> None:
    two = three_turns[1]
    drain(
        chat_edit_start(user=actors.owner, conversation_id=conversation.pk, message_id=two.pk, text="Other")
    )

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            chat_branch_switch(user=actors.owner, conversation_id=conversation.pk, message_id=two.pk)
        return len(captured)

    short = queries()
    for n in range(30):  # thirty more turns under the branch switched to
        message_append(conversation=conversation, role=MessageRole.USER, content=f"Q{n}")
        message_append(conversation=conversation, role=MessageRole.ASSISTANT, content=f"A{n}")
    assert queries() == short
    assert shown(conversation)[-1] == "A29"


# --- regenerate --------------------------------------------------------------------------


def test_regenerating_the_last_answer_sends_the_same_history_and_keeps_both_answers(
    actors: Actors, conversation: Conversation, fake_upstream: FakeUpstream, three_turns: list[Message]
) -> None:
    first_request = fake_upstream.requests[-1].json["messages"]
    conversation.refresh_from_db()
    old_answer = conversation.current_leaf
    assert old_answer is not None and old_answer.role == MessageRole.ASSISTANT
    fake_upstream.script(
        sse([native_frame("a better answer"), native_frame("", usage=usage(40, 3, cached=30))])
    )

    turn = drain(
        chat_regenerate_start(user=actors.owner, conversation_id=conversation.pk, message_id=old_answer.pk)
    )

    assert fake_upstream.requests[-1].json["messages"] == first_request
    new_answer = turn.assistant_message
    assert new_answer is not None and new_answer.parent_id == old_answer.parent_id
    assert turn.answer_siblings == [old_answer.pk, new_answer.pk] and turn.replaced == [old_answer.pk]
    assert shown(conversation)[-1] == "a better answer"
    page = client_for(actors.owner).get(reverse("chat:conversation-detail", args=[conversation.pk]))
    content = page.content.decode()
    assert '<span class="branch-position">2 / 2</span>' in content
    assert "30 cached (75%)" in content, "the regenerated turn shows its cached share"
    assert UsageRecord.objects.filter(conversation_id=conversation.pk).count() == 4


def test_only_the_last_answer_on_screen_is_regenerated(
    actors: Actors, conversation: Conversation, fake_upstream: FakeUpstream, three_turns: list[Message]
) -> None:
    first_answer = Message.objects.get(parent=three_turns[0])
    requests = len(fake_upstream.requests)

    with pytest.raises(Exception, match="Only the last answer"):
        chat_regenerate_start(user=actors.owner, conversation_id=conversation.pk, message_id=first_answer.pk)

    assert len(fake_upstream.requests) == requests
    assert Message.objects.filter(parent=three_turns[0]).count() == 1


# --- delete ------------------------------------------------------------------------------


def test_deleting_a_middle_turn_keeps_the_later_ones_and_every_usage_record(
    actors: Actors, conversation: Conversation, fake_upstream: FakeUpstream, three_turns: list[Message]
) -> None:
    _, two, three = three_turns
    records = set(UsageRecord.objects.values_list("pk", flat=True))

    response = client_for(actors.owner).post(reverse("chat:turn-delete", args=[conversation.pk, two.pk]))

    assert response.status_code == 302
    assert shown(conversation) == ["One", "answer to One", "Three", "answer to Three"]
    assert set(UsageRecord.objects.values_list("pk", flat=True)) == records
    assert all(r.conversation_id == conversation.pk for r in UsageRecord.objects.all())
    send(actors, conversation, "Four")
    assert [content for _, content in sent(fake_upstream)][1:] == [
        "One",
        "answer to One",
        "Three",
        "answer to Three",
        "Four",
    ]
    three.refresh_from_db()
    assert three.parent is not None and three.parent.content == "answer to One"


def test_deleting_a_question_takes_its_regenerated_answers_and_tool_round_trips(
    actors: Actors, conversation: Conversation, fake_upstream: FakeUpstream, three_turns: list[Message]
) -> None:
    three = three_turns[2]
    conversation.refresh_from_db()
    assert conversation.current_leaf is not None
    drain(
        chat_regenerate_start(
            user=actors.owner, conversation_id=conversation.pk, message_id=conversation.current_leaf.pk
        )
    )
    assert Message.objects.filter(parent=three).count() == 2

    deleted = chat_turn_delete(user=actors.owner, conversation_id=conversation.pk, message_id=three.pk)

    assert len(deleted) == 3
    assert shown(conversation) == ["One", "answer to One", "Two", "answer to Two"]
    assert UsageRecord.objects.filter(conversation_id=conversation.pk).count() == 4


def test_deleting_the_question_on_screen_shows_the_branch_beside_it(
    actors: Actors, conversation: Conversation, fake_upstream: FakeUpstream, three_turns: list[Message]
) -> None:
    two = three_turns[1]
    edited = drain(
        chat_edit_start(user=actors.owner, conversation_id=conversation.pk, message_id=two.pk, text="Edited")
    ).user_message

    chat_turn_delete(user=actors.owner, conversation_id=conversation.pk, message_id=edited.pk)

    assert shown(conversation) == ["One", "answer to One", "Two", "answer to Two", "Three", "answer to Three"]
    page = client_for(actors.owner).get(reverse("chat:conversation-detail", args=[conversation.pk]))
    assert b"branch-position" not in page.content, "one branch left: no switcher"


# --- fork --------------------------------------------------------------------------------


def test_a_fork_copies_the_setup_and_the_branch_up_to_the_message_and_the_records_stay(
    actors: Actors, conversation: Conversation, fake_upstream: FakeUpstream, three_turns: list[Message]
) -> None:
    conversation.tools = [
        {"type": "function", "function": {"name": "clock", "parameters": {"type": "object"}}}
    ]
    conversation.parameters = {"temperature": 0.3}
    conversation.save()
    two_answer = Message.objects.get(parent=three_turns[1])

    response = client_for(actors.owner).post(
        reverse("chat:conversation-fork", args=[conversation.pk, two_answer.pk])
    )

    fork = Conversation.objects.exclude(pk=conversation.pk).get()
    assert response.status_code == 302 and response["Location"] == reverse(
        "chat:conversation-detail", args=[fork.pk]
    )
    assert (fork.team_id, fork.connection_id, fork.model_id) == (
        conversation.team_id,
        conversation.connection_id,
        conversation.model_id,
    )
    assert (fork.system_prompt, fork.tools, fork.parameters) == (
        "Be brief.",
        conversation.tools,
        {"temperature": 0.3},
    )
    assert fork.affinity_key and fork.affinity_key != conversation.affinity_key
    assert shown(fork) == ["One", "answer to One", "Two", "answer to Two"]
    assert not UsageRecord.objects.filter(conversation_id=fork.pk).exists()
    assert UsageRecord.objects.filter(conversation_id=conversation.pk).count() == 3
    send(actors, fork, "Five")
    assert [content for _, content in sent(fake_upstream)][1:] == [
        "One",
        "answer to One",
        "Two",
        "answer to Two",
        "Five",
    ]


def spend(actors: Actors) -> tuple[Any, list[dict[str, Any]]]:
    """The team's headline totals for the last day and its conversations ranked by cost."""
    filters = filters_from_query(user=actors.owner, query=QueryDict("range=24h"))
    assert filters is not None
    return headline(filters).totals, top_conversations(filters)


def test_a_forks_answers_keep_their_model_and_usage_line_and_nothing_is_counted_twice(
    actors: Actors, conversation: Conversation, fake_upstream: FakeUpstream, three_turns: list[Message]
) -> None:
    Conversation.objects.filter(pk=conversation.pk).update(model_id=SCOUT)
    four = answered(actors, conversation, "Four, on Scout", fake_upstream)
    answers = list(Message.objects.filter(parent__in=[*three_turns, four]).order_by("id"))
    before = spend(actors)

    fork = chat_fork(user=actors.owner, conversation_id=conversation.pk, message_id=answers[-1].pk)
    again = chat_fork(user=actors.owner, conversation_id=fork.pk, message_id=fork.current_leaf_id or 0)

    for copy in (fork, again):
        copies = list(copy.messages.filter(role=MessageRole.ASSISTANT).order_by("id"))
        assert [m.copied_record_id for m in copies] == [a.usage_record_id for a in answers]
        assert all(m.usage_record_id is None for m in copies)
        page = (
            client_for(actors.owner).get(reverse("chat:conversation-detail", args=[copy.pk])).content.decode()
        )
        assert f"Answered by <code>{KIMI_K26}</code>" in page and f"Answered by <code>{SCOUT}</code>" in page
        assert page.count('<footer class="usage-line"') == 4 and page.count("from the original</span>") == 4
        assert page.count("<span>20 in</span>") == 4 and page.count("View request") == 4
        request = client_for(actors.owner).get(reverse("chat:message-request", args=[copy.pk, copies[0].pk]))
        assert request.status_code == 200 and b"One" in request.content
        assert conversation_usage_so_far(conversation=copy).turns == 0
    assert spend(actors) == before  # the team's spend, and each conversation's, as before the forks
    assert [row["conversation_id"] for row in before[1]] == [conversation.pk]
    assert UsageRecord.objects.filter(conversation_id__in=[fork.pk, again.pk]).count() == 0

    # Forked before the switch to Scout: its next answer is named Scout's as it streams, as on
    # the page, since the copied answer before it was Kimi's.
    early = chat_fork(user=actors.owner, conversation_id=conversation.pk, message_id=answers[2].pk)
    turn = send(actors, early, "Five")
    assert turn.model_label == SCOUT
    assert [row["conversation_id"] for row in spend(actors)[1]] == [conversation.pk, early.pk]


# --- who may -----------------------------------------------------------------------------


def test_another_teams_conversation_or_message_is_a_404_in_every_branch_action(
    actors: Actors,
    conversation: Conversation,
    other_conversation: Conversation,
    fake_upstream: FakeUpstream,
    three_turns: list[Message],
) -> None:
    two = three_turns[1]
    theirs = Message.objects.create(conversation=other_conversation, role=MessageRole.USER, content="Theirs")
    other_conversation.current_leaf = theirs
    other_conversation.save()
    outsider, owner = client_for(actors.outsider), client_for(actors.owner)
    before = (Message.objects.count(), Conversation.objects.count(), len(fake_upstream.requests))

    for name in ("chat:branch-switch", "chat:turn-delete", "chat:conversation-fork"):
        # Another team's conversation, with a message of it or of the outsider's own.
        assert outsider.post(reverse(name, args=[conversation.pk, two.pk])).status_code == 404, name
        assert outsider.post(reverse(name, args=[conversation.pk, theirs.pk])).status_code == 404, name
        # The owner's conversation with another conversation's message, and the reverse.
        assert owner.post(reverse(name, args=[conversation.pk, theirs.pk])).status_code == 404, name
        assert owner.post(reverse(name, args=[other_conversation.pk, theirs.pk])).status_code == 404, name
        assert owner.post(reverse(name, args=[other_conversation.pk, two.pk])).status_code == 404, name

    for service in (chat_edit_start, chat_regenerate_start):
        kwargs = {"text": "x"} if service is chat_edit_start else {}
        with pytest.raises(MessageNotFound):
            service(user=actors.owner, conversation_id=conversation.pk, message_id=theirs.pk, **kwargs)
    assert (Message.objects.count(), Conversation.objects.count(), len(fake_upstream.requests)) == before
    conversation.refresh_from_db()
    assert conversation.current_leaf is not None and conversation.current_leaf.content == "answer to Three"


def test_viewers_may_not_switch_delete_or_fork(
    actors: Actors, conversation: Conversation, fake_upstream: FakeUpstream, three_turns: list[Message]
) -> None:
    viewer = client_for(actors.viewer)
    for name in ("chat:branch-switch", "chat:turn-delete", "chat:conversation-fork"):
        assert viewer.post(reverse(name, args=[conversation.pk, three_turns[0].pk])).status_code == 403, name
    assert Message.objects.count() == 6 and Conversation.objects.count() == 1


# --- the migration -----------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_existing_conversations_become_one_branch_each(actors: Actors) -> None:
    before, after = ("chat", "0005_comparisons_and_their_columns"), ("chat", "0006_message_tree")
    executor = MigrationExecutor(connection)
    executor.migrate([before])
    old = executor.loader.project_state([before]).apps
    conversations = old.get_model("chat", "Conversation").objects
    messages = old.get_model("chat", "Message").objects
    first = conversations.create(team_id=actors.team.pk, user_id=actors.owner.pk, model_id="m")
    second = conversations.create(team_id=actors.team.pk, user_id=actors.owner.pk, model_id="m")
    empty = conversations.create(team_id=actors.team.pk, user_id=actors.owner.pk, model_id="m")
    ids = {
        conversation.pk: [
            messages.create(conversation_id=conversation.pk, role=role, content=f"{conversation.pk}-{n}").pk
            for n, role in enumerate(
                ["user", "assistant", "user", "assistant"][: 4 if conversation == first else 2]
            )
        ]
        for conversation in (first, second)
    }

    executor = MigrationExecutor(connection)
    executor.migrate([after])
    new = executor.loader.project_state([after]).apps
    rows = new.get_model("chat", "Message").objects
    for conversation_id, chain in ids.items():
        assert [rows.get(pk=pk).parent_id for pk in chain] == [None, *chain[:-1]]
        assert (
            new.get_model("chat", "Conversation").objects.get(pk=conversation_id).current_leaf_id == chain[-1]
        )
    assert new.get_model("chat", "Conversation").objects.get(pk=empty.pk).current_leaf_id is None
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())


def test_a_regenerated_continuation_sends_the_tool_round_trip_again(
    actors: Actors, conversation: Conversation, fake_upstream: FakeUpstream
) -> None:
    conversation.tools = [
        {"type": "function", "function": {"name": "clock", "parameters": {"type": "object"}}}
    ]
    conversation.save()
    question = message_append(conversation=conversation, role=MessageRole.USER, content="Time?")
    calls = [{"index": 0, "id": "c0", "name": "clock", "arguments": "{}", "valid": True, "errors": []}]
    asked = message_append(conversation=conversation, role=MessageRole.ASSISTANT, tool_calls=calls)
    continued = drain(
        chat_continue_start(
            user=actors.owner,
            conversation_id=conversation.pk,
            message_id=asked.pk,
            results={0: ToolResultInput(text="noon")},
        )
    )
    assert continued.assistant_message is not None
    first = fake_upstream.requests[-1].json["messages"]
    assert [m["role"] for m in first] == ["system", "user", "assistant", "tool"]

    again = drain(
        chat_regenerate_start(
            user=actors.owner, conversation_id=conversation.pk, message_id=continued.assistant_message.pk
        )
    )

    assert fake_upstream.requests[-1].json["messages"] == first
    assert again.assistant_message is not None
    assert again.assistant_message.parent_id == continued.tool_results[-1].pk
    assert question.pk in [m.pk for m in branch_shown(conversation=conversation).messages]


def test_a_question_forked_unanswered_is_answered_by_its_own_id(
    actors: Actors, conversation: Conversation, fake_upstream: FakeUpstream, three_turns: list[Message]
) -> None:
    fork = chat_fork(user=actors.owner, conversation_id=conversation.pk, message_id=three_turns[1].pk)
    assert fork.current_leaf is not None and shown(fork) == ["One", "answer to One", "Two"]

    turn = drain(
        chat_regenerate_start(user=actors.owner, conversation_id=fork.pk, message_id=fork.current_leaf.pk)
    )

    assert sent(fake_upstream)[1:] == [("user", "One"), ("assistant", "answer to One"), ("user", "Two")]
    assert turn.assistant_message is not None and turn.replaced == []
    assert shown(fork) == ["One", "answer to One", "Two", fake_upstream.default_text]


# --- images and failed continuations --------------------------------------------------------


def test_an_edited_question_keeps_its_images_as_copies_that_outlive_the_original(
    actors: Actors,
    workers_connection: ProviderConnection,
    fake_upstream: FakeUpstream,
    settings: Any,
    tmp_path: Path,
) -> None:
    settings.MEDIA_ROOT = tmp_path / "media"
    vision = conversation_create(user=actors.owner, connection_id=workers_connection.pk, model_id=SCOUT)
    image = attachment_store(conversation=vision, image=image_clean(png()))
    question = drain(
        chat_turn_start(
            user=actors.owner, conversation_id=vision.pk, text="What is it?", attachment_ids=[image.pk]
        )
    ).user_message

    edited = drain(
        chat_edit_start(
            user=actors.owner, conversation_id=vision.pk, message_id=question.pk, text="What colour?"
        )
    ).user_message
    sent_parts = fake_upstream.requests[-1].json["messages"][-1]["content"]
    chat_turn_delete(user=actors.owner, conversation_id=vision.pk, message_id=question.pk)

    assert [part["type"] for part in sent_parts] == ["text", "image_url"]
    assert not Attachment.objects.filter(pk=image.pk).exists()
    copy = Attachment.objects.get(message=edited)
    assert copy.sha256 == image.sha256 and copy.file.name != image.file.name
    with copy.file.open("rb") as file:
        assert hashlib.sha256(file.read()).hexdigest() == copy.sha256


def test_deleting_a_failed_continuation_removes_its_results_and_the_calls_can_be_answered_again(
    actors: Actors, conversation: Conversation, fake_upstream: FakeUpstream, settings: Any
) -> None:
    settings.UPSTREAM_MAX_RETRIES = 0
    conversation.tools = [CLOCK_TOOL]
    conversation.save()
    message_append(conversation=conversation, role=MessageRole.USER, content="Time?")
    calls = [{"index": 0, "id": "c0", "name": "clock", "arguments": "{}", "valid": True, "errors": []}]
    asked = message_append(conversation=conversation, role=MessageRole.ASSISTANT, tool_calls=calls)
    fake_upstream.script(error(500))
    failed = drain(
        chat_continue_start(
            user=actors.owner,
            conversation_id=conversation.pk,
            message_id=asked.pk,
            results={0: ToolResultInput(text="noon")},
        )
    ).assistant_message
    assert failed is not None and failed.is_failed_answer
    results = list(asked.tool_results.values_list("pk", flat=True))

    deleted = chat_turn_delete(user=actors.owner, conversation_id=conversation.pk, message_id=failed.pk)

    assert sorted(deleted) == sorted([failed.pk, *results]) and len(results) == 1
    assert not asked.tool_results.exists()
    assert shown(conversation) == ["Time?", ""]
    drain(
        chat_continue_start(
            user=actors.owner,
            conversation_id=conversation.pk,
            message_id=asked.pk,
            results={0: ToolResultInput(text="one o'clock")},
        )
    )
    assert fake_upstream.requests[-1].json["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "c0",
        "content": "one o'clock",
    }


def test_view_code_and_the_preflight_follow_the_last_message_the_page_shows(
    actors: Actors, conversation: Conversation, fake_upstream: FakeUpstream, three_turns: list[Message]
) -> None:
    first_answer = Message.objects.get(parent=three_turns[0])
    owner = client_for(actors.owner)
    code_url = reverse("chat:next-request-code", args=[conversation.pk])
    preflight_url = reverse("chat:preflight", args=[conversation.pk])

    whole = owner.post(code_url, {"message": "Next"}).content.decode()
    shorter = owner.post(code_url, {"message": "Next", "after": str(first_answer.pk)}).content.decode()
    estimates = [
        owner.post(preflight_url, {"message": "Next", **after}).content.decode()
        for after in ({}, {"after": str(first_answer.pk)})
    ]

    assert "Three" in whole and "Three" not in shorter and "One" in shorter
    assert estimates[0] != estimates[1]


# --- written messages: an edited answer, a message inserted anywhere ----------------------------


def answer_to(question: Message) -> Message:
    return Message.objects.get(parent=question, role=MessageRole.ASSISTANT)


def test_an_answer_rewritten_by_hand_is_a_new_branch_the_next_turn_sends_as_the_models_own(
    actors: Actors, conversation: Conversation, three_turns: list[Message], fake_upstream: FakeUpstream
) -> None:
    """A few-shot example: saved, nothing sent; the original answer stays beside it."""
    original = answer_to(three_turns[1])
    requests = len(fake_upstream.requests)
    url = reverse("chat:message-write", args=[conversation.pk])

    response = client_for(actors.owner).post(
        url,
        {"role": "assistant", "text": '  Two, in JSON: {"n": 2}  ', "replacing": original.pk},
        headers={"HX-Request": "true"},
    )

    assert response.status_code == 200 and "Written, not generated here" in response.text
    assert len(fake_upstream.requests) == requests  # nothing was sent
    written = Message.objects.get(written=True)
    assert (written.parent_id, written.role, written.content) == (
        three_turns[1].pk,
        "assistant",
        'Two, in JSON: {"n": 2}',
    )
    assert shown(conversation) == ["One", "answer to One", "Two", 'Two, in JSON: {"n": 2}']
    answered(actors, conversation, "Four", fake_upstream)
    assert sent(fake_upstream)[-3:] == [
        ("user", "Two"),
        ("assistant", 'Two, in JSON: {"n": 2}'),
        ("user", "Four"),
    ]
    assert Message.objects.filter(pk=original.pk).exists() and written.usage_record_id is None


def test_a_message_inserted_after_any_message_starts_a_branch_from_there(
    actors: Actors, conversation: Conversation, three_turns: list[Message], fake_upstream: FakeUpstream
) -> None:
    first_answer = answer_to(three_turns[0])

    inserted = chat_message_write(
        user=actors.owner,
        conversation_id=conversation.pk,
        role="user",
        text="One more thing?",
        after_id=first_answer.pk,
    )
    example = chat_message_write(
        user=actors.owner,
        conversation_id=conversation.pk,
        role="assistant",
        text="Yes.",
        after_id=inserted.pk,
    )

    assert shown(conversation) == ["One", "answer to One", "One more thing?", "Yes."]
    assert example.parent_id == inserted.pk and inserted.parent_id == first_answer.pk
    answered(actors, conversation, "Go on.", fake_upstream)
    assert [content for _, content in sent(fake_upstream)][-5:] == [
        "One", "answer to One", "One more thing?", "Yes.", "Go on."
    ]  # fmt: skip
    # Before the first message too; and a written answer may be deleted alone.
    chat_message_write(user=actors.owner, conversation_id=conversation.pk, role="user", text="Context first.")
    assert shown(conversation) == ["Context first."]
    chat_turn_delete(user=actors.owner, conversation_id=conversation.pk, message_id=example.pk)
    assert not Message.objects.filter(pk=example.pk).exists()
    assert Message.objects.filter(pk=inserted.pk).exists()  # alone: not the question before it


@pytest.mark.parametrize(
    ("role", "text", "where", "refusal"),
    [
        ("assistant", "   ", "after", "Type a message first."),
        ("tool", "42", "after", "A written message is a user message or an assistant message."),
        ("user", "Hi", "replacing", "An edited copy of a assistant message is a assistant message."),
        ("assistant", "x\u0000y", "after", "Null characters are not allowed."),
    ],
)
def test_a_written_message_is_refused_with_the_reason_and_nothing_changes(
    actors: Actors,
    conversation: Conversation,
    three_turns: list[Message],
    role: str,
    text: str,
    where: str,
    refusal: str,
) -> None:
    answer = answer_to(three_turns[2])
    before = shown(conversation)

    response = client_for(actors.owner).post(
        reverse("chat:message-write", args=[conversation.pk]), {"role": role, "text": text, where: answer.pk}
    )

    assert response.status_code == 400 and refusal in response.text
    assert shown(conversation) == before and not Message.objects.filter(written=True).exists()


def test_nothing_is_inserted_between_a_tool_call_and_its_results(
    actors: Actors, conversation: Conversation, fake_upstream: FakeUpstream
) -> None:
    call = message_append(
        conversation=conversation,
        role=MessageRole.ASSISTANT,
        content="",
        tool_calls=[
            {"index": 0, "id": "c1", "name": "clock", "arguments": "{}", "valid": True, "errors": []}
        ],
    )

    with pytest.raises(ValidationError, match="tool calls wait for their results"):
        chat_message_write(
            user=actors.owner, conversation_id=conversation.pk, role="user", text="Hi", after_id=call.pk
        )
    outsider = client_for(actors.outsider).post(
        reverse("chat:message-write", args=[conversation.pk]), {"role": "user", "text": "Hi"}
    )
    assert outsider.status_code == 404


def test_a_user_message_inserted_without_an_answer_still_goes_out(
    actors: Actors, conversation: Conversation, three_turns: list[Message], fake_upstream: FakeUpstream
) -> None:
    """Unlike a question whose request failed (left out with its turn), the user put it there."""
    chat_message_write(
        user=actors.owner,
        conversation_id=conversation.pk,
        role="user",
        text="Context: prices are in euros.",
        after_id=answer_to(three_turns[2]).pk,
    )

    answered(actors, conversation, "Four", fake_upstream)

    assert sent(fake_upstream)[-3:] == [
        ("assistant", "answer to Three"),
        ("user", "Context: prices are in euros."),
        ("user", "Four"),
    ]
