from __future__ import annotations

import asyncio
from typing import Any

import pytest

from playground.providers.adapters import ChatRequest, adapter_for
from playground.providers.adapters.workers_ai import WorkersAIAdapter
from playground.providers.events import (
    Finish,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
    UpstreamError,
    UsageReport,
)
from playground.providers.models import ConnectionKind, ProviderConnection
from playground.providers.secrets import token_encrypt
from tests.fakes.upstream import (
    FakeUpstream,
    chat_completion,
    collect,
    envelope,
    error,
    json_reply,
    native_frame,
    openai_chunk,
    sse,
    text_twice_frame,
    usage,
    usage_chunk,
    v4_error,
)

TOKEN = "cf-token-0123456789abcdef"
KIMI = "@cf/moonshotai/kimi-k2.5"


def adapter(fake: FakeUpstream) -> WorkersAIAdapter:
    return WorkersAIAdapter(base_url=fake.workers_base_url, account_id="acc123", token=TOKEN)


def ask(**overrides: Any) -> ChatRequest:
    fields: dict[str, Any] = {"model": KIMI, "messages": [{"role": "user", "content": "Hi"}], **overrides}
    return ChatRequest(**fields)


def text_of(events: list[Any]) -> str:
    return "".join(event.text for event in events if isinstance(event, TextDelta))


async def test_it_posts_to_the_run_endpoint_with_the_bearer_token_and_affinity_header(
    fake_upstream: FakeUpstream,
) -> None:
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]
    request = ask(
        max_tokens=64,
        temperature=0.2,
        tools=tools,
        tool_choice="required",
        response_format={"type": "json_object"},
        affinity_key="ses_42",
    )

    await collect(adapter(fake_upstream).stream(request))

    sent = fake_upstream.requests[0]
    assert sent.method == "POST"
    assert sent.path == "/client/v4/accounts/acc123/ai/run/@cf/moonshotai/kimi-k2.5"
    assert sent.headers["authorization"] == f"Bearer {TOKEN}"
    assert sent.headers["x-session-affinity"] == "ses_42"
    assert sent.json == {
        "messages": [{"role": "user", "content": "Hi"}],
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_tokens": 64,
        "temperature": 0.2,
        "tools": tools,
        "tool_choice": "required",
        "response_format": {"type": "json_object"},
    }


async def test_it_sends_no_affinity_header_without_a_key(fake_upstream: FakeUpstream) -> None:
    await collect(adapter(fake_upstream).stream(ask()))

    assert "x-session-affinity" not in fake_upstream.requests[0].headers


async def test_it_streams_native_frames_into_text_usage_and_finish(fake_upstream: FakeUpstream) -> None:
    fake_upstream.script(
        sse(
            [
                native_frame("New"),
                native_frame(" York"),
                native_frame("", usage=usage(10, 50, cached=4)),
            ],
            headers={"cf-ray": "8f1e2d3c4b5a-SJC"},
        )
    )

    events = await collect(adapter(fake_upstream).stream(ask()))

    assert events[:2] == [TextDelta("New"), TextDelta(" York")]
    report, finish = events[2:]
    assert isinstance(report, UsageReport)
    assert (report.usage.prompt_tokens, report.usage.completion_tokens, report.usage.cached_tokens) == (
        10,
        50,
        4,
    )
    assert finish == Finish(reason="stop", upstream_request_id="8f1e2d3c4b5a-SJC")


async def test_it_streams_openai_chunks_with_reasoning_and_tool_calls(fake_upstream: FakeUpstream) -> None:
    fake_upstream.script(
        sse(
            [
                openai_chunk(reasoning="Think"),
                openai_chunk(reasoning=" more", reasoning_field="reasoning"),
                openai_chunk("Calling."),
                openai_chunk(
                    tool_calls=[
                        {
                            "index": 0,
                            "id": "functions.lookup:0",
                            "type": "function",
                            "function": {"name": "lookup", "arguments": '{"q":'},
                        }
                    ]
                ),
                openai_chunk(tool_calls=[{"index": 0, "function": {"arguments": '"x"}'}}]),
                openai_chunk(finish_reason="tool_calls"),
                usage_chunk(usage(20, 9)),
            ]
        )
    )

    events = await collect(adapter(fake_upstream).stream(ask()))

    assert events[:5] == [
        ReasoningDelta("Think"),
        ReasoningDelta(" more"),
        TextDelta("Calling."),
        ToolCallDelta(index=0, id="functions.lookup:0", name="lookup", arguments='{"q":'),
        ToolCallDelta(index=0, id=None, name=None, arguments='"x"}'),
    ]
    assert events[-1] == Finish(reason="tool_calls", upstream_request_id="chatcmpl-fake")


async def test_it_does_not_double_text_from_a_frame_that_carries_it_twice(
    fake_upstream: FakeUpstream,
) -> None:
    fake_upstream.script(sse([text_twice_frame("Here"), text_twice_frame(" it is")]))

    events = await collect(adapter(fake_upstream).stream(ask()))

    assert text_of(events) == "Here it is"


async def test_it_merges_the_usage_chunk_and_the_native_trailer_without_double_counting(
    fake_upstream: FakeUpstream,
) -> None:
    fake_upstream.script(
        sse(
            [
                openai_chunk("Hi", chunk_id="chatcmpl-kimi"),
                openai_chunk(finish_reason="stop", chunk_id="chatcmpl-kimi"),
                usage_chunk(usage(1386, 1306), chunk_id="chatcmpl-kimi"),
                native_frame("", usage=usage(1386, 1306, cached=1024)),
            ]
        )
    )

    events = await collect(adapter(fake_upstream).stream(ask()))

    reports = [event for event in events if isinstance(event, UsageReport)]
    assert len(reports) == 1
    assert reports[0].usage.prompt_tokens == 1386
    assert reports[0].usage.completion_tokens == 1306
    assert reports[0].usage.cached_tokens == 1024
    assert text_of(events) == "Hi"


async def test_it_turns_a_json_reply_to_a_stream_request_into_the_same_events(
    fake_upstream: FakeUpstream,
) -> None:
    completion = chat_completion(
        "Paris.",
        reasoning="The capital.",
        tool_calls=[{"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
        finish_reason="stop",
        usage_body=usage(30, 5, cached=16),
        completion_id="chatcmpl-json",
    )
    fake_upstream.script(json_reply(envelope(completion)))

    events = await collect(adapter(fake_upstream).stream(ask()))

    assert events[:3] == [
        ReasoningDelta("The capital."),
        TextDelta("Paris."),
        ToolCallDelta(index=0, id="call_1", name="f", arguments="{}"),
    ]
    assert isinstance(events[3], UsageReport)
    assert events[3].usage.cached_tokens == 16
    assert events[4] == Finish(reason="stop", upstream_request_id="chatcmpl-json")


async def test_it_reads_a_native_json_result_when_no_stream_was_asked(fake_upstream: FakeUpstream) -> None:
    fake_upstream.script(
        json_reply(
            envelope(
                {
                    "response": "Four.",
                    "tool_calls": [{"name": "add", "arguments": {"a": 2, "b": 2}}],
                    "usage": usage(8, 2),
                }
            )
        )
    )

    events = await collect(adapter(fake_upstream).stream(ask(stream=False)))

    body = fake_upstream.requests[0].json
    assert body["stream"] is False
    assert "stream_options" not in body
    assert events[:2] == [
        TextDelta("Four."),
        ToolCallDelta(index=0, id=None, name="add", arguments='{"a": 2, "b": 2}'),
    ]
    assert isinstance(events[2], UsageReport)
    assert events[2].usage.completion_tokens == 2
    assert events[3] == Finish(reason="tool_calls")


async def test_it_reports_the_v4_error_code_and_message(fake_upstream: FakeUpstream) -> None:
    fake_upstream.script(
        error(
            403, v4_error(5035, "This model requires the Workers Paid plan."), headers={"cf-ray": "ray-403"}
        )
    )

    events = await collect(adapter(fake_upstream).stream(ask()))

    assert events == [
        UpstreamError(
            message="This model requires the Workers Paid plan.",
            http_status=403,
            code="5035",
            upstream_request_id="ray-403",
        )
    ]


async def test_it_reports_an_error_frame_inside_the_stream(fake_upstream: FakeUpstream) -> None:
    fake_upstream.script(sse([native_frame("Hel"), {"error": {"message": "model crashed", "code": 3043}}]))

    events = await collect(adapter(fake_upstream).stream(ask()))

    assert events == [TextDelta("Hel"), UpstreamError(message="model crashed", code="3043")]


async def test_it_redacts_the_token_when_the_upstream_echoes_it(fake_upstream: FakeUpstream) -> None:
    fake_upstream.script(error(401, v4_error(10000, f"Authentication error: bad token {TOKEN}")))

    events = await collect(adapter(fake_upstream).stream(ask()))

    assert len(events) == 1 and isinstance(events[0], UpstreamError)
    assert events[0].http_status == 401
    assert events[0].message.startswith("Authentication error")
    assert TOKEN not in events[0].message


@pytest.mark.django_db
def test_it_builds_a_workers_ai_adapter_from_a_connection(fake_upstream: FakeUpstream, actors: Any) -> None:
    connection = ProviderConnection.objects.create(
        team=actors.team,
        name="Cloudflare",
        kind=ConnectionKind.WORKERS_AI,
        base_url=fake_upstream.workers_base_url,
        account_id="acc999",
        token_ciphertext=token_encrypt(TOKEN),
    )

    events = asyncio.run(collect(adapter_for(connection).stream(ask())))

    sent = fake_upstream.requests[0]
    assert sent.path == "/client/v4/accounts/acc999/ai/run/@cf/moonshotai/kimi-k2.5"
    assert sent.headers["authorization"] == f"Bearer {TOKEN}"
    assert text_of(events) == fake_upstream.default_text


@pytest.mark.django_db
def test_it_points_an_engine_connection_at_the_embedded_engine_under_the_teams_own_account_id(
    fake_upstream: FakeUpstream, actors: Any, settings: Any
) -> None:
    settings.ENGINE_URL = fake_upstream.url
    settings.ENGINE_API_TOKEN = "engine-token-abc"
    ours, theirs = (
        ProviderConnection.objects.create(team=team, name="Engine", kind=ConnectionKind.ENGINE)
        for team in (actors.team, actors.other_team)
    )

    for connection in (ours, theirs):
        asyncio.run(collect(adapter_for(connection).stream(ask(model="@local/smollm2-135m-instruct"))))

    paths = [request.path for request in fake_upstream.requests]
    assert paths == [
        f"/client/v4/accounts/team-{actors.team.pk}/ai/run/@local/smollm2-135m-instruct",
        f"/client/v4/accounts/team-{actors.other_team.pk}/ai/run/@local/smollm2-135m-instruct",
    ]
    assert fake_upstream.requests[0].headers["authorization"] == "Bearer engine-token-abc"
