"""One builder per cause of a metered call: a chat turn, a compare column, a batch item, a gateway request.

Each says, once, what the record of its cause carries (path, source, streamed, priced on), who
holds its budget (`calls.budget`) and how its record is settled (`calls.settlement`), so the
features no longer assemble a `RequestContext` and a `MeteredCall` by hand. The builders take
ids and plain values: the usage floor never imports the feature apps that call it.
"""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import replace

from playground.providers.adapters import ChatAdapter, ChatRequest
from playground.usage.budgets import KeyBudget
from playground.usage.calls.budget import HeldByCaller, HoldAtAdmission, HoldOnSend
from playground.usage.calls.call import MeteredCall
from playground.usage.calls.context import Attribution, RequestContext
from playground.usage.calls.settlement import Alone, Grouped, Keep
from playground.usage.models import RequestPath
from playground.usage.pricing import KnownCard
from playground.usage.sources import COMPARISON_COLUMN, source_string


def chat_turn_call(
    *,
    adapter: ChatAdapter,
    request: ChatRequest,
    context_window: int | None,
    team_id: int,
    user_id: int,
    connection_id: int | None,
    model_id: str,
    conversation_id: int | None,
    preset_version_id: int | None,
    path: str = RequestPath.CHAT,
    source: str = "",
) -> MeteredCall:
    """A chat turn's (or a tool continuation's) call, its record caused by the conversation.

    Its budget is held as it is sent; the turn sets what it keeps of the answer (`Alone`) once
    it exists. `path` and `source` are for the causes that reuse it (`compare_column_call`)."""
    context = RequestContext(
        team_id=team_id,
        user_id=user_id,
        connection_id=connection_id,
        model_id=model_id,
        conversation_id=conversation_id,
        preset_version_id=preset_version_id,
        affinity_key=request.affinity_key,
        streamed=request.stream,
        path=path,
        source=source,
    )
    return MeteredCall(
        adapter=adapter, request=request, context=context, context_window=context_window, budget=HoldOnSend()
    )


def compare_column_call(
    *,
    adapter: ChatAdapter,
    request: ChatRequest,
    context_window: int | None,
    team_id: int,
    user_id: int,
    connection_id: int,
    model_id: str,
    preset_version_id: int | None,
    column_id: int,
    attempt: int,
) -> MeteredCall:
    """A compare column's call: a chat turn's without a conversation, its record caused by the
    column's attempt (`compare-column:<id>:<attempt>`)."""
    return chat_turn_call(
        adapter=adapter,
        request=request,
        context_window=context_window,
        team_id=team_id,
        user_id=user_id,
        connection_id=connection_id,
        model_id=model_id,
        conversation_id=None,
        preset_version_id=preset_version_id,
        path=RequestPath.COMPARE,
        source=source_string(COMPARISON_COLUMN, column_id, attempt),
    )


def batch_context(
    *,
    team_id: int,
    user_id: int | None,
    connection_id: int | None,
    model_id: str,
    preset_version_id: int | None,
    priced_on: dt.date | None,
    source: str = "",
    card: KnownCard | None = None,
    tags: tuple[str, ...] = (),
) -> RequestContext:
    """What a batch item's record carries: priced by the card of the day its batch was submitted
    (`priced_on`; `card` when already looked up), never streamed. `source`: the item's attempt;
    `tags`: what the record is tagged with (an experiment's batch names the experiment)."""
    return RequestContext(
        team_id=team_id,
        user_id=user_id,
        connection_id=connection_id,
        model_id=model_id,
        preset_version_id=preset_version_id,
        streamed=False,
        path=RequestPath.BATCH,
        source=source,
        priced_on=priced_on,
        price_card=card,
        attribution=Attribution(tags=tags),
    )


def batch_item_call(
    *,
    adapter: ChatAdapter,
    request: ChatRequest,
    context: RequestContext,
    context_window: int | None,
    keep: Keep,
    held_by_caller: bool,
) -> MeteredCall:
    """A batch item's call: its record and its result (`keep`) commit together, since a step
    sends an item again when its result is missing; `held_by_caller`: its chunk's budget is
    held and settled by the queue path (`HeldByCaller`)."""
    return MeteredCall(
        adapter=adapter,
        request=request,
        context=context,
        context_window=context_window,
        budget=HeldByCaller() if held_by_caller else HoldOnSend(),
        settlement=Alone(keep, atomic=True),
    )


def gateway_call(
    *,
    adapter: ChatAdapter,
    request: ChatRequest,
    team_id: int,
    user_id: int | None,
    connection_id: int | None,
    model_id: str,
    attribution: Attribution,
    key: KeyBudget,
    store: str,
    upstream_redaction: bool = False,
    held_at_admission: bool = True,
) -> MeteredCall:
    """A gateway request's call: its budget (the team's, the key creator's and the key's own)
    held at admission, with the requests admitted together; its record named before it exists
    (the answer's headers carry its id) and written with those of the calls ending meanwhile.
    A routed request's later attempts (`held_at_admission=False`) hold theirs as they start,
    at the price of the target each calls. `store`: the storage mode its record is kept in;
    `upstream_redaction`: its team's (`calls.upstream`), known with the key."""
    context = RequestContext(
        team_id=team_id,
        user_id=user_id,
        connection_id=connection_id,
        model_id=model_id,
        affinity_key=request.affinity_key,
        streamed=request.stream,
        path=RequestPath.GATEWAY,
        attribution=replace(attribution, api_key_id=key.id),
        request_id=uuid.uuid4(),
        store=store,
        upstream_redaction=upstream_redaction,
    )
    return MeteredCall(
        adapter=adapter,
        request=request,
        context=context,
        budget=HoldAtAdmission(key) if held_at_admission else HoldOnSend(key),
        settlement=Grouped(),
    )
