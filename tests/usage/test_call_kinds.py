"""`usage.calls.kinds`: what each cause's record carries, who holds its budget, how it settles."""

from __future__ import annotations

import datetime as dt
from dataclasses import replace
from decimal import Decimal
from typing import TypedDict

from playground.providers.adapters import ChatRequest
from playground.providers.adapters.openai_compat import OpenAICompatAdapter
from playground.usage.budgets import KeyBudget
from playground.usage.calls.budget import HeldByCaller, HoldAtAdmission, HoldOnSend
from playground.usage.calls.context import Attribution
from playground.usage.calls.kinds import (
    batch_context,
    batch_item_call,
    chat_turn_call,
    compare_column_call,
    gateway_call,
)
from playground.usage.calls.settlement import Alone, Grouped
from playground.usage.models import RequestPath

ADAPTER = OpenAICompatAdapter(base_url="http://127.0.0.1:9/v1", token="t")
REQUEST = ChatRequest(model="m", messages=[{"role": "user", "content": "hi"}], affinity_key="pg-1")


class Ids(TypedDict):
    team_id: int
    user_id: int
    connection_id: int
    model_id: str
    preset_version_id: int


IDS: Ids = {"team_id": 1, "user_id": 2, "connection_id": 3, "model_id": "m", "preset_version_id": 4}


def test_a_compare_column_is_a_chat_turn_without_a_conversation_caused_by_its_attempt() -> None:
    turn = chat_turn_call(adapter=ADAPTER, request=REQUEST, context_window=8, conversation_id=5, **IDS)
    column = compare_column_call(
        adapter=ADAPTER, request=REQUEST, context_window=8, column_id=6, attempt=2, **IDS
    )

    assert column.context == replace(
        turn.context, conversation_id=None, path=RequestPath.COMPARE, source="compare-column:6:2"
    )
    assert turn.context.path == RequestPath.CHAT and turn.context.affinity_key == "pg-1"
    for call in (turn, column):
        assert call.budget == HoldOnSend() and call.settlement == Grouped() and call.context_window == 8


def test_a_batch_item_commits_its_result_with_its_record_and_may_leave_its_budget_to_its_caller() -> None:
    context = batch_context(priced_on=dt.date(2026, 1, 2), source="batch-item:7:1", **IDS)

    def keep(record: object, outcome: object) -> None:
        del record, outcome

    alone = batch_item_call(
        adapter=ADAPTER,
        request=REQUEST,
        context=context,
        context_window=None,
        keep=keep,
        held_by_caller=False,
    )
    replayed = batch_item_call(
        adapter=ADAPTER, request=REQUEST, context=context, context_window=None, keep=keep, held_by_caller=True
    )

    assert (context.path, context.streamed, context.priced_on) == (
        RequestPath.BATCH,
        False,
        dt.date(2026, 1, 2),
    )
    assert alone.settlement == replayed.settlement == Alone(keep, atomic=True)
    assert (alone.budget, replayed.budget) == (HoldOnSend(), HeldByCaller())


def test_a_gateway_request_is_held_at_admission_with_its_key_and_settled_grouped() -> None:
    key = KeyBudget(id=9, name="ci", limit=Decimal(5))
    call = gateway_call(
        adapter=ADAPTER,
        request=REQUEST,
        team_id=1,
        user_id=None,
        connection_id=3,
        model_id="m",
        attribution=Attribution(end_user="ana"),
        key=key,
        store="redacted",
    )
    other = gateway_call(
        adapter=ADAPTER, request=REQUEST, team_id=1, user_id=None, connection_id=3, model_id="m",
        attribution=Attribution(), key=key, store="full",
    )  # fmt: skip

    assert (call.budget, call.settlement) == (HoldAtAdmission(key), Grouped())
    assert call.context.attribution == Attribution(api_key_id=9, end_user="ana")
    assert call.context.path == RequestPath.GATEWAY and call.context.affinity_key == "pg-1"
    assert call.context.request_id is not None and call.context.request_id != other.context.request_id
    assert (call.context.store, other.context.store) == ("redacted", "full")
