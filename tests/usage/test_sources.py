"""What caused a record, named through the registry that chat and batches fill: labels, links,
deleted things and another team's ids."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from playground.batches.models import Batch, BatchItem, BatchPath
from playground.catalog.seed import ENGINE_MODEL_ID
from playground.chat.models import Conversation
from playground.usage.models import UsageRecord
from playground.usage.sources import (
    BATCH_ITEM,
    CONVERSATION,
    SourceKey,
    SourceLink,
    record_source_key,
    record_source_links,
    source_links,
)

pytestmark = pytest.mark.django_db


def conversation_of(team: Any, user: Any, title: str = "") -> Conversation:
    return Conversation.objects.create(team=team, user=user, model_id=ENGINE_MODEL_ID, title=title)


def item_of(team: Any) -> BatchItem:
    batch = Batch.objects.create(
        team=team, model_id=ENGINE_MODEL_ID, input_kind="jsonl", path=BatchPath.CONCURRENT, path_reason="test"
    )
    return BatchItem.objects.create(batch=batch, index=0, line=1, request={"messages": []})


def record_of(team: Any, *, conversation_id: int | None = None, source: str = "") -> UsageRecord:
    return UsageRecord.objects.create(
        team=team, model_id=ENGINE_MODEL_ID, status="ok", conversation_id=conversation_id, source=source
    )


def test_a_records_conversation_or_batch_item_comes_with_its_label_and_page(actors: Any) -> None:
    chat = conversation_of(actors.team, actors.owner, "Alpha's chat")
    untitled = conversation_of(actors.team, actors.owner)
    item = item_of(actors.team)
    item.attempt = 2
    records = [
        record_of(actors.team, conversation_id=chat.pk),
        record_of(actors.team, conversation_id=untitled.pk),
        record_of(actors.team, source=item.source),
        record_of(actors.team),
    ]

    links = record_source_links(team_id=actors.team.pk, records=records)

    chat_url = reverse("chat:conversation-detail", args=[chat.pk])
    untitled_url = reverse("chat:conversation-detail", args=[untitled.pk])
    assert links == [
        SourceLink(f"Conversation #{chat.pk}", chat_url, "Alpha's chat"),
        SourceLink(f"Conversation #{untitled.pk}", untitled_url, ""),
        SourceLink(f"Batch item {item.pk}, attempt 2", reverse("batches:item-detail", args=[item.pk])),
        None,
    ]
    assert [link.name for link in links[:2] if link] == ["Alpha's chat", f"Conversation #{untitled.pk}"]


def test_a_page_of_records_costs_one_query_per_kind(actors: Any, django_assert_num_queries: Any) -> None:
    records = [
        record_of(actors.team, conversation_id=conversation_of(actors.team, actors.owner).pk)
        for _ in range(5)
    ]
    records += [record_of(actors.team, source=item_of(actors.team).source) for _ in range(5)]

    with django_assert_num_queries(2):
        links = record_source_links(team_id=actors.team.pk, records=records)

    assert all(link is not None and link.url for link in links)


def test_deleting_a_conversation_keeps_its_records_pointing_at_it(actors: Any) -> None:
    chat = conversation_of(actors.team, actors.owner, "Gone soon")
    record = record_of(actors.team, conversation_id=chat.pk)
    chat_id = chat.pk

    chat.delete()

    record.refresh_from_db()
    assert record.conversation_id == chat_id
    assert record_source_links(team_id=actors.team.pk, records=[record]) == [
        SourceLink(f"Conversation #{chat_id} (deleted)")
    ]


def test_another_teams_conversation_or_item_never_resolves(actors: Any) -> None:
    bravo_chat = conversation_of(actors.other_team, actors.outsider, "Bravo secret")
    bravo_item = item_of(actors.other_team)

    links = source_links(
        team_id=actors.team.pk,
        keys=[SourceKey(CONVERSATION, bravo_chat.pk), SourceKey(BATCH_ITEM, bravo_item.pk)],
    )

    assert links == {
        SourceKey(CONVERSATION, bravo_chat.pk): SourceLink(f"Conversation #{bravo_chat.pk} (deleted)"),
        SourceKey(BATCH_ITEM, bravo_item.pk): SourceLink(f"Batch item {bravo_item.pk} (deleted)"),
    }
    # The same ids resolve for their own team.
    own = source_links(team_id=actors.other_team.pk, keys=[SourceKey(CONVERSATION, bravo_chat.pk)])
    assert own[SourceKey(CONVERSATION, bravo_chat.pk)].title == "Bravo secret"


def test_a_source_of_no_registered_kind_or_no_known_shape_has_no_link(actors: Any) -> None:
    assert record_source_key(conversation_id=None, source="gateway:7:1") == SourceKey("gateway", 7, 1)
    assert record_source_key(conversation_id=None, source="batch-item:x:1") is None
    assert record_source_key(conversation_id=None, source="") is None

    assert source_links(team_id=actors.team.pk, keys=[SourceKey("gateway", 7, 1)]) == {}
