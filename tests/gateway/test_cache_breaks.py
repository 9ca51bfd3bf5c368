"""The cache-break detector on real gateway records: one test per cause, each two requests of a
session through the gateway to a loopback upstream that reports the cached tokens a real cache
would, and a growing conversation on the real engine with affinity on that never breaks."""

from __future__ import annotations

import json
from dataclasses import replace
from decimal import Decimal
from io import StringIO
from typing import Any

import httpx
import pytest
from django.core.management import call_command

from playground.usage.insights.cache_break_diff import section_diff
from playground.usage.insights.cache_break_selectors import team_breaks
from playground.usage.insights.cache_break_store import kept_team_breaks, record_break
from playground.usage.insights.cache_breaks import Cause
from playground.usage.models import UsageRecord
from tests.fakes.upstream import FakeUpstream, json_reply
from tests.gateway.conftest import KIMI, IssuedKey, records_written
from tests.support.browser import LiveApp
from tests.support.engine import EngineProcess

LLAMA = "@cf/meta/llama-3.3-70b-instruct-fp8-fast"
SYSTEM = {"role": "system", "content": "You answer billing questions."}
TOOLS = [
    {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}
    for name in ("lookup", "refund", "escalate")
]
FIRST = [SYSTEM, {"role": "user", "content": "Where is invoice 7?"}]
ANSWER = {"role": "assistant", "content": "It was sent on Monday."}
NEXT = {"role": "user", "content": "Can you resend it?"}


def _reply(prompt: int, cached: int) -> str:
    usage = {
        "prompt_tokens": prompt,
        "completion_tokens": 5,
        "total_tokens": prompt + 5,
        "prompt_tokens_details": {"cached_tokens": cached},
    }
    choice = {"index": 0, "message": {"role": "assistant", "content": "Done"}, "finish_reason": "stop"}
    return json.dumps({"id": "chatcmpl-1", "object": "chat.completion", "choices": [choice], "usage": usage})


def _send(
    gateway: LiveApp,
    key: IssuedKey,
    upstream: FakeUpstream,
    body: dict[str, Any],
    *,
    prompt: int,
    cached: int,
    affinity: str | None = "aff-1",
) -> None:
    upstream.script(json_reply(_reply(prompt, cached)))
    headers = {**key.headers, "x-playground-session": "billing-7"}
    if affinity is not None:
        headers["x-session-affinity"] = affinity
    response = httpx.post(gateway.url + "/v1/chat/completions", json=body, headers=headers, timeout=30)
    assert response.status_code == 200, response.text


def _body(messages: list[dict[str, Any]], *, model: str = KIMI, tools: list[Any] = TOOLS) -> dict[str, Any]:
    return {"model": model, "messages": messages, "tools": tools}


SECOND = [*FIRST, ANSWER, NEXT]
# cause -> (the second request's body, its affinity key, the detail the break names)
CASES: dict[Cause, tuple[dict[str, Any], str | None, str]] = {
    Cause.MODEL_CHANGED: (_body(SECOND, model=LLAMA), "aff-1", f"from {KIMI} to {LLAMA}"),
    Cause.TOOLS_CHANGED: (
        _body(SECOND, tools=[TOOLS[1], TOOLS[0], TOOLS[2]]),
        "aff-1",
        "tools list was reordered",
    ),
    Cause.SYSTEM_CHANGED: (
        _body([{"role": "system", "content": "You answer billing questions briefly."}, *SECOND[1:]]),
        "aff-1",
        "system prompt changed",
    ),
    Cause.HISTORY_CHANGED: (
        _body([SYSTEM, {"role": "user", "content": "Where is invoice 8?"}, ANSWER, NEXT]),
        "aff-1",
        "a message of turn 1 was edited",
    ),
    Cause.FORMAT_CHANGED: (
        {**_body(SECOND), "response_format": {"type": "json_object"}},
        "aff-1",
        "a JSON response format was added",
    ),
    Cause.AFFINITY_MISSING: (_body(SECOND), None, "no session affinity key"),
    Cause.AFFINITY_CHANGED: (_body(SECOND), "aff-2", "affinity key changed"),
    Cause.EVICTED: (_body(SECOND), "aff-1", "prefix was intact"),
}


@pytest.mark.parametrize("cause", list(CASES), ids=str)
def test_each_cause_is_named_at_the_request_that_lost_its_prefix(
    gateway: LiveApp, gateway_key: IssuedKey, fake_upstream: FakeUpstream, cause: Cause
) -> None:
    body, affinity, detail = CASES[cause]
    _send(gateway, gateway_key, fake_upstream, _body(FIRST), prompt=1000, cached=0)
    _send(gateway, gateway_key, fake_upstream, body, prompt=1100, cached=20, affinity=affinity)
    first, second = records_written(2)

    (found,) = list(team_breaks(team_id=first.team_id, since=first.created_at))
    assert (found.record_id, found.previous_record_id, found.cause) == (second.pk, first.pk, cause)
    assert (found.session, found.turn) == ("session:billing-7", 2)
    assert detail in found.detail
    assert (found.cached_tokens, found.expected_cached_tokens, found.lost_tokens) == (20, 1000, 980)
    # At the card of the request that broke (Kimi's alias card today: fresh minus cached input
    # price per token); Llama has no cache discount, so its misses cost nothing more.
    card = second.price_card
    assert card is not None
    saved_per_token = (card.input_per_m - card.effective_cached_input_per_m) / 1_000_000
    assert found.lost_usd == Decimal(980) * saved_per_token
    assert (found.lost_usd > 0) == (cause != Cause.MODEL_CHANGED)
    # Found when the second record was written, and kept: the replay's break to the turn's count.
    assert record_break(second) == found
    assert [
        replace(kept, turn=2) for kept in kept_team_breaks(team_id=first.team_id, since=first.created_at)
    ] == [found]
    assert record_break(first) is None
    if cause == Cause.HISTORY_CHANGED:
        assert found.changed_turn == 1
        diff = section_diff(cause, first.request_body, second.request_body)
        assert [(line.kind, line.text.strip()) for line in diff if line.kind in "+-"] == [
            ("-", '"content": "Where is invoice 7?",'),
            ("+", '"content": "Where is invoice 8?",'),
        ]
    if cause == Cause.TOOLS_CHANGED:
        diff = section_diff(cause, first.request_body, second.request_body)
        changed = [(line.kind, line.text.strip()) for line in diff if line.kind in "+-"]
        assert changed == [
            ("-", '"name": "lookup",'),
            ("+", '"name": "refund",'),
            ("-", '"name": "refund",'),
            ("+", '"name": "lookup",'),
        ]


def test_a_system_message_added_mid_conversation_is_named_as_a_system_change(
    gateway: LiveApp, gateway_key: IssuedKey, fake_upstream: FakeUpstream
) -> None:
    """The earlier messages are untouched (only appended to), but a template renders the new
    system message with the system prompt: the prefix changed at its start, not an eviction."""
    _send(gateway, gateway_key, fake_upstream, _body(FIRST), prompt=1000, cached=0)
    later_system = {"role": "system", "content": "From now on answer in French."}
    _send(gateway, gateway_key, fake_upstream, _body([*SECOND, later_system]), prompt=1100, cached=20)
    first, _second = records_written(2)

    (found,) = list(team_breaks(team_id=first.team_id, since=first.created_at))
    assert found.cause == Cause.SYSTEM_CHANGED
    assert "added mid-conversation" in found.detail


def test_a_growing_conversation_whose_cache_held_has_no_break(
    gateway: LiveApp, gateway_key: IssuedKey, fake_upstream: FakeUpstream
) -> None:
    messages = list(FIRST)
    prompt = 1000
    for turn in range(4):
        _send(
            gateway,
            gateway_key,
            fake_upstream,
            _body(messages),
            prompt=prompt,
            cached=max(0, prompt - 110 - 16),
        )
        messages += [ANSWER, {"role": "user", "content": f"And then {turn}?"}]
        prompt += 110
    records = records_written(4)
    assert [r.cached_tokens for r in records] == [874, 984, 1094, 1204]
    assert list(team_breaks(team_id=records[0].team_id, since=records[0].created_at)) == []
    # The same cache gone at the fifth turn is a break (the rule is not blind).
    _send(gateway, gateway_key, fake_upstream, _body(messages), prompt=prompt, cached=0)
    records_written(5)
    (found,) = list(team_breaks(team_id=records[0].team_id, since=records[0].created_at))
    assert (found.cause, found.turn) == (Cause.EVICTED, 5)


def test_the_command_prints_one_json_line_per_break(
    gateway: LiveApp, gateway_key: IssuedKey, fake_upstream: FakeUpstream
) -> None:
    _send(gateway, gateway_key, fake_upstream, _body(FIRST), prompt=1000, cached=0)
    _send(gateway, gateway_key, fake_upstream, _body(SECOND), prompt=1100, cached=0, affinity=None)
    first, second = records_written(2)
    out = StringIO()
    team = first.team
    call_command(
        "cache_breaks",
        "--team",
        team.slug,
        "--since",
        f"{first.created_at:%Y-%m-%d}",
        "--format",
        "jsonl",
        stdout=out,
    )
    (line,) = [json.loads(text) for text in out.getvalue().splitlines()]
    assert line == {
        "record_id": second.pk,
        "session": "session:billing-7",
        "turn": 2,
        "cause": "affinity_missing",
        "cached_tokens": 0,
        "expected_cached_tokens": 1000,
        "lost_usd": 0.00079,  # 1,000 tokens at the K2.6 card: $0.95 fresh, $0.16 cached per million
    }


def test_a_plain_conversation_on_the_engine_with_affinity_has_no_break(
    gateway: LiveApp, engine_key: IssuedKey, running_engine: EngineProcess
) -> None:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a terse assistant. " + "Answer in one short sentence. " * 20}
    ]
    headers = {**engine_key.headers, "x-session-affinity": "engine-aff", "x-playground-session": "engine-s"}
    for turn in range(4):
        messages.append({"role": "user", "content": f"Name a colour, number {turn}."})
        body = {"model": running_engine.model_id, "messages": messages, "max_tokens": 6, "temperature": 0}
        response = httpx.post(gateway.url + "/v1/chat/completions", json=body, headers=headers, timeout=120)
        assert response.status_code == 200, response.text
        messages.append({"role": "assistant", "content": response.json()["choices"][0]["message"]["content"]})
    records = records_written(4)
    assert all(
        r.cached_tokens is not None and r.cached_tokens >= records[i].prompt_tokens - 1
        for i, r in enumerate(records[1:])
    ), [(r.prompt_tokens, r.cached_tokens) for r in records]
    assert list(team_breaks(team_id=records[0].team_id, since=records[0].created_at)) == []


def test_a_record_without_its_body_is_an_other_break(
    gateway: LiveApp, gateway_key: IssuedKey, fake_upstream: FakeUpstream
) -> None:
    _send(gateway, gateway_key, fake_upstream, _body(FIRST), prompt=1000, cached=0)
    _send(gateway, gateway_key, fake_upstream, _body(SECOND), prompt=1100, cached=0)
    first, _ = records_written(2)
    UsageRecord.objects.filter(pk=first.pk).update(request_body=None, prefix_digest=None)
    (found,) = list(team_breaks(team_id=first.team_id, since=first.created_at))
    assert found.cause == Cause.OTHER


def _send_bare(
    gateway: LiveApp,
    key: IssuedKey,
    upstream: FakeUpstream,
    body: dict[str, Any],
    *,
    prompt: int,
    cached: int,
    affinity: str | None = None,
) -> None:
    """A client that names no session: only an affinity key (the Workers AI convention), or nothing."""
    upstream.script(json_reply(_reply(prompt, cached)))
    headers = {**key.headers, **({"x-session-affinity": affinity} if affinity else {})}
    response = httpx.post(gateway.url + "/v1/chat/completions", json=body, headers=headers, timeout=30)
    assert response.status_code == 200, response.text


@pytest.mark.parametrize(
    ("third_affinity", "cause"), [(None, Cause.AFFINITY_MISSING), ("aff-2", Cause.AFFINITY_CHANGED)], ids=str
)
def test_an_affinity_only_client_that_drops_or_changes_its_key_gets_the_break_at_that_turn(
    gateway: LiveApp,
    gateway_key: IssuedKey,
    fake_upstream: FakeUpstream,
    third_affinity: str | None,
    cause: Cause,
) -> None:
    third = [*SECOND, ANSWER, {"role": "user", "content": "Thanks, and invoice 9?"}]
    _send_bare(gateway, gateway_key, fake_upstream, _body(FIRST), prompt=1000, cached=0, affinity="aff-1")
    _send_bare(gateway, gateway_key, fake_upstream, _body(SECOND), prompt=1100, cached=990, affinity="aff-1")
    _send_bare(
        gateway, gateway_key, fake_upstream, _body(third), prompt=1200, cached=0, affinity=third_affinity
    )
    first, _second, last = records_written(3)

    (found,) = list(team_breaks(team_id=first.team_id, since=first.created_at))
    assert (found.record_id, found.cause, found.turn) == (last.pk, cause, 3)
    assert found.session == f"inferred:{gateway_key.key.pk}:{first.pk}"
    assert record_break(last) == found  # kept when it was written, the inferred session's name too


def test_a_client_that_names_nothing_gets_its_conversations_inferred_apart(
    gateway: LiveApp, gateway_key: IssuedKey, fake_upstream: FakeUpstream
) -> None:
    other_first = [SYSTEM, {"role": "user", "content": "Cancel order 12."}]
    other_second = [*other_first, ANSWER, {"role": "user", "content": "And order 13?"}]
    resend_today = {"role": "user", "content": "Can you resend it today?"}
    edited = [*FIRST, ANSWER, resend_today, ANSWER, {"role": "user", "content": "Thanks."}]
    _send_bare(gateway, gateway_key, fake_upstream, _body(FIRST), prompt=1000, cached=0)
    _send_bare(gateway, gateway_key, fake_upstream, _body(other_first), prompt=1000, cached=0)
    _send_bare(gateway, gateway_key, fake_upstream, _body(SECOND), prompt=1100, cached=990)  # intact
    _send_bare(gateway, gateway_key, fake_upstream, _body(other_second), prompt=1100, cached=990)  # intact
    _send_bare(gateway, gateway_key, fake_upstream, _body(edited), prompt=1200, cached=0)  # turn 2 edited
    records = records_written(5)

    found = list(team_breaks(team_id=records[0].team_id, since=records[0].created_at))
    assert [(b.record_id, b.previous_record_id, b.cause) for b in found] == [
        (records[4].pk, records[2].pk, Cause.HISTORY_CHANGED)
    ]
    assert found[0].session == f"inferred:{gateway_key.key.pk}:{records[0].pk}"
