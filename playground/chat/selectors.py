"""Reads of conversations, always scoped to the acting user's teams."""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import heapq
from dataclasses import dataclass
from itertools import batched, islice

from django.db import connection
from django.db.models import Count, Q, QuerySet, Sum
from django.db.models.functions import Coalesce
from django.utils import timezone

from playground.accounts.models import Membership
from playground.accounts.selectors import AnyUser
from playground.chat.domain.branches import MessageTree, branch_leaf_id
from playground.chat.models import Attachment, Conversation, Message, SystemPromptChange
from playground.chat.search.matching import matching_conversation_ids, recent_matches, search_terms
from playground.presets.setup import ConnectionRef, PresetSetup
from playground.usage.models import RequestPath, UsageRecord, UsageStatus


def conversation_list(*, user: AnyUser) -> QuerySet[Conversation]:
    if not user.is_authenticated:
        return Conversation.objects.none()
    return Conversation.objects.filter(team__memberships__user_id=user.pk).select_related(
        "team", "connection"
    )


CONVERSATION_PAGE_SIZE = 50
COUNT_CAP = 1000  # beyond it the list says "1,000+": an exact count would read a whole team


class BadCursor(ValueError):
    """A page link whose cursor we did not make (garbled, truncated or forged)."""


@dataclass(frozen=True)
class ConversationPage:
    conversations: list[Conversation]  # with their team and connection
    next_cursor: str  # "" on the last page


def conversation_page(
    *, user: AnyUser, cursor: str = "", size: int = CONVERSATION_PAGE_SIZE
) -> ConversationPage:
    """The user's teams' conversations, most recently updated first, `size` at a time.

    Keyset pages, never OFFSET: the cursor is the last row's (updated_at, id) and the next
    page starts strictly after it, so the thousandth page costs what the first costs. Each
    team is read on its own down the (team, -updated_at, -id) index, at most `size + 1` rows,
    and the teams are merged here: one query over all of a user's teams would have to sort
    every conversation they hold (PostgreSQL cannot walk one index for `team_id IN (...)` in
    `updated_at` order). A conversation used while someone pages moves to the top, so it can
    leave the pages still to come; rows never repeat or go missing otherwise.
    """
    after = conversation_cursor_decode(cursor) if cursor else None
    per_team = [list(_newest_first(team_id=team_id, after=after)[: size + 1]) for team_id in _team_ids(user)]
    merged = list(islice(heapq.merge(*per_team, key=_sort_key, reverse=True), size + 1))
    page = merged[:size]
    more = len(merged) > size and bool(page)
    return ConversationPage(conversations=page, next_cursor=conversation_cursor(page[-1]) if more else "")


RECENT_CHECKED = 2000  # the newest conversations checked directly before the index is asked


def conversation_search(
    *, user: AnyUser, text: str, cursor: str = "", size: int = CONVERSATION_PAGE_SIZE
) -> ConversationPage:
    """The user's teams' conversations whose title or one message holds every word of `text`
    (`chat.search.matching`), most recently updated first, in keyset pages like `conversation_page`.

    First the `RECENT_CHECKED` newest conversations (after the cursor) are checked directly:
    if more than a page of them match, or they were all there is, they are the answer, exact
    and in order, whatever the word. Otherwise the word is rare among them and the full-text
    index gives every match, which is then few: the cost stays near a page's whether the word
    is in one conversation or in all of them. No word in `text`: no results.
    """
    after = conversation_cursor_decode(cursor) if cursor else None
    terms = search_terms(text)
    team_ids = _team_ids(user)
    if not terms or not team_ids:
        return ConversationPage(conversations=[], next_cursor="")
    recent = _recent_ids(team_ids=team_ids, after=after, limit=RECENT_CHECKED)
    found: list[int] = []
    start, step = 0, 2 * size
    while start < len(recent) and len(found) <= size:  # doubling steps: "the" stops after the first
        chunk = recent[start : start + step]
        hits = recent_matches(chunk, terms)
        found += [pk for pk in chunk if pk in hits]
        start, step = start + step, step * 2
    if len(found) <= size and len(recent) == RECENT_CHECKED:  # rare among the newest: the index
        found = _newest_of(matching_conversation_ids(terms), team_ids=team_ids, after=after, limit=size + 1)
    by_id = Conversation.objects.select_related("team", "connection").in_bulk(found[: size + 1])
    rows = [by_id[pk] for pk in found[: size + 1] if pk in by_id]
    page = rows[:size]
    more = len(rows) > size
    return ConversationPage(conversations=page, next_cursor=conversation_cursor(page[-1]) if more else "")


def _recent_ids(*, team_ids: list[int], after: tuple[dt.datetime, int] | None, limit: int) -> list[int]:
    """The ids of the `limit` newest conversations of `team_ids` after the cursor, newest first
    (each team down its own index, merged, as `conversation_page` reads them)."""
    per_team = []
    for team_id in team_ids:
        rows = Conversation.objects.filter(team_id=team_id)
        if after is not None:
            rows = rows.filter(_older_than(after))
        per_team.append(list(rows.order_by("-updated_at", "-id").values_list("updated_at", "id")[:limit]))
    merged = heapq.merge(*per_team, reverse=True)
    return [pk for _, pk in islice(merged, limit)]


def _newest_of(
    ids: list[int], *, team_ids: list[int], after: tuple[dt.datetime, int] | None, limit: int
) -> list[int]:
    """The `limit` newest of the conversations `ids` in `team_ids` after the cursor, newest
    first, read by primary key in batches the database takes (SQLite binds at most 999
    parameters, as Django counts them; PostgreSQL has no such limit)."""
    newest: list[tuple[dt.datetime, int]] = []
    batch = (connection.features.max_query_params or 10_000) - len(team_ids) - 4  # the cursor's too
    for chunk in batched(ids, batch):
        rows = Conversation.objects.filter(pk__in=chunk, team_id__in=team_ids)
        if after is not None:
            rows = rows.filter(_older_than(after))
        newest = heapq.nlargest(limit, [*newest, *rows.order_by().values_list("updated_at", "id")])
    return [pk for _, pk in newest]


def conversation_count_capped(*, user: AnyUser, cap: int = COUNT_CAP) -> int:
    """How many conversations the user's teams hold, counting no further than `cap` + 1."""
    team_ids = _team_ids(user)
    if not team_ids:
        return 0
    # No ORDER BY: with one, the capped subquery would sort every conversation of the teams.
    return Conversation.objects.filter(team_id__in=team_ids).order_by()[: cap + 1].count()


def conversation_cursor(conversation: Conversation) -> str:
    raw = f"{conversation.updated_at.isoformat()},{conversation.pk}"
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def conversation_cursor_decode(cursor: str) -> tuple[dt.datetime, int]:
    """(updated_at, id) from a cursor `conversation_cursor` made; BadCursor for anything else."""
    if len(cursor) > 120:  # ours are about 60 characters
        raise BadCursor("too long")
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode("ascii")
        when, _, pk = raw.rpartition(",")
        updated_at = dt.datetime.fromisoformat(when)
        last_id = int(pk)
    except (ValueError, binascii.Error) as exc:  # UnicodeDecodeError is a ValueError
        raise BadCursor(str(exc)) from exc
    if updated_at.tzinfo is None or last_id < 1 or not pk.isdigit():
        raise BadCursor("not a cursor of ours")
    return updated_at, last_id


def _team_ids(user: AnyUser) -> list[int]:
    if not user.is_authenticated:
        return []
    return list(Membership.objects.filter(user_id=user.pk).values_list("team_id", flat=True))


def _newest_first(*, team_id: int, after: tuple[dt.datetime, int] | None) -> QuerySet[Conversation]:
    rows = Conversation.objects.filter(team_id=team_id).select_related("team", "connection")
    if after is not None:
        rows = rows.filter(_older_than(after))
    return rows.order_by("-updated_at", "-id")


def _older_than(after: tuple[dt.datetime, int]) -> Q:
    """Rows after the cursor's (updated_at, id) in newest-first order."""
    updated_at, last_id = after
    # The redundant `lte` bounds the index scan at the cursor (an OR alone cannot bound it).
    return (Q(updated_at__lt=updated_at) | Q(updated_at=updated_at, id__lt=last_id)) & Q(
        updated_at__lte=updated_at
    )


def _sort_key(conversation: Conversation) -> tuple[dt.datetime, int]:
    return conversation.updated_at, conversation.pk


def conversation_get(*, user: AnyUser, conversation_id: int) -> Conversation | None:
    """The conversation if one of the user's teams owns it; None otherwise (callers answer 404)."""
    return conversation_list(user=user).filter(pk=conversation_id).first()


async def aconversation_get(*, user: AnyUser, conversation_id: int) -> Conversation | None:
    return await conversation_list(user=user).filter(pk=conversation_id).afirst()


def conversation_setup(conversation: Conversation) -> PresetSetup:
    """The conversation's settings as a preset setup (to save as a version, or start a batch from)."""
    connection = conversation.connection
    return PresetSetup(
        connection=ConnectionRef(
            id=connection.pk if connection else None,
            name=connection.name if connection else "",
            kind=connection.kind if connection else "",
        ),
        model_id=conversation.model_id,
        system_prompt=conversation.system_prompt,
        variables=list(conversation.variables or []),
        tools=list(conversation.tools or []),
        tool_choice=conversation.tool_choice,
        parallel_tool_calls=conversation.parallel_tool_calls,
        auto_mock_steps=conversation.auto_mock_steps,
        response_format=conversation.response_format or None,
        parameters=dict(conversation.parameters or {}),
        use_affinity=conversation.use_affinity,
    )


def message_list(*, conversation: Conversation) -> QuerySet[Message]:
    """A conversation's messages with their usage records (a fork's copies with the original's;
    the caller already checked access)."""
    # Request bodies hold the whole history each: loaded one at a time by `message_request_get`.
    return (
        conversation.messages.select_related(
            "usage_record", "usage_record__price_card", "copied_record", "copied_record__price_card"
        )
        .defer("usage_record__request_body", "copied_record__request_body")
        .prefetch_related("attachments")
    )


@dataclass(frozen=True)
class BranchShown:
    """The branch on screen: its messages, first first (with their records and images), and
    for those where branches fork, every alternative's id oldest first ("< 2 / 3 >")."""

    messages: list[Message]
    alternatives: dict[int, list[int]]


def branch_shown(*, conversation: Conversation) -> BranchShown:
    """The messages of the branch ending at the conversation's current leaf (the caller
    already checked access)."""
    tree = MessageTree.load(conversation)
    path = tree.path(branch_leaf_id(conversation, tree))
    rows = message_list(conversation=conversation).filter(pk__in=path).in_bulk()
    alternatives = {pk: tree.siblings(pk) for pk in path if len(tree.siblings(pk)) > 1}
    return BranchShown(messages=[rows[pk] for pk in path], alternatives=alternatives)


def message_request_get(*, user: AnyUser, conversation_id: int, message_id: int) -> UsageRecord | None:
    """The usage record of one answer (a fork's copy: the original's, of the same team), with its
    request body, if the user's team owns it."""
    conversation = conversation_get(user=user, conversation_id=conversation_id)
    if conversation is None:
        return None
    message = (
        conversation.messages.filter(pk=message_id).select_related("usage_record", "copied_record").first()
    )
    return message.shown_record if message is not None else None


def attachment_get(*, user: AnyUser, attachment_id: int) -> Attachment | None:
    """The image if one of the user's teams owns its conversation (any role, viewers too);
    None otherwise (callers answer 404)."""
    if not user.is_authenticated:
        return None
    return (
        Attachment.objects.filter(pk=attachment_id, conversation__team__memberships__user_id=user.pk)
        .select_related("conversation")
        .first()
    )


@dataclass(frozen=True)
class UsageSoFar:
    """What a conversation's answered turns have used: the pre-flight cost's "expected" reads it."""

    turns: int
    prompt_tokens: int
    cached_tokens: int  # a turn whose provider did not say counts none
    completion_tokens: int


def conversation_usage_so_far(*, conversation: Conversation) -> UsageSoFar:
    """Sums over the conversation's answered (`ok`) turns (the caller already checked access)."""
    return _usage_of(
        UsageRecord.objects.filter(
            team_id=conversation.team_id, conversation_id=conversation.pk, status=UsageStatus.OK
        )
    )


# How far back the team's own turns on a model stand in for a conversation that has none yet.
TEAM_RECENT = dt.timedelta(days=7)


def team_recent_chat_usage(*, team_id: int, model_id: str) -> UsageSoFar:
    """Sums over the team's answered chat turns on `model_id` in the last `TEAM_RECENT`: what a
    conversation's first turn (or a fork's) is expected from."""
    since = timezone.now() - TEAM_RECENT
    return _usage_of(
        UsageRecord.objects.filter(
            team_id=team_id,
            model_id=model_id,
            path=RequestPath.CHAT,
            status=UsageStatus.OK,
            created_at__gte=since,
        )
    )


def _usage_of(records: QuerySet[UsageRecord]) -> UsageSoFar:
    totals = records.aggregate(
        turns=Count("pk"),
        prompt=Coalesce(Sum("prompt_tokens"), 0),
        cached=Coalesce(Sum("cached_tokens"), 0),
        completion=Coalesce(Sum("completion_tokens"), 0),
    )
    return UsageSoFar(
        turns=totals["turns"],
        prompt_tokens=totals["prompt"],
        cached_tokens=totals["cached"],
        completion_tokens=totals["completion"],
    )


def conversation_system_changes(*, conversation: Conversation) -> list[SystemPromptChange]:
    """The conversation's system prompt changes, oldest first (the caller already checked access)."""
    return list(SystemPromptChange.objects.filter(conversation=conversation).select_related("user"))
