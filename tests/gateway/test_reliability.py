"""Idempotency, rate limits, upstream failures, clients that leave, and budgets under concurrency."""

from __future__ import annotations

import asyncio
import threading
import time
from decimal import Decimal
from typing import Any

import httpx
import openai
import pytest
from django.conf import LazySettings
from openai import OpenAI

from playground.providers.models import ProviderConnection
from playground.usage.calls import settlement as settle_queue
from playground.usage.models import UsageRecord, UsageStatus
from playground.usage.records import usage_records_create_many
from tests.fakes.upstream import FakeUpstream, Frame, error, hang, openai_chunk, sse, usage, usage_chunk
from tests.gateway.conftest import KIMI, IssuedKey, issue, records_written
from tests.support.actors import Actors
from tests.support.browser import LiveApp

BODY: dict[str, Any] = {"model": KIMI, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 50}


def _post(gateway: LiveApp, key: IssuedKey, body: Any = BODY, **headers: str) -> httpx.Response:
    return httpx.post(
        gateway.url + "/v1/chat/completions", json=body, headers={**key.headers, **headers}, timeout=30
    )


def test_an_idempotent_repeat_gets_the_stored_answer_without_a_second_call_or_record(
    gateway: LiveApp, gateway_key: IssuedKey, fake_upstream: FakeUpstream
) -> None:
    first = _post(gateway, gateway_key, **{"idempotency-key": "order-991"})
    again = _post(gateway, gateway_key, **{"idempotency-key": "order-991"})
    other_body = _post(gateway, gateway_key, {**BODY, "max_tokens": 51}, **{"idempotency-key": "order-991"})

    assert first.status_code == again.status_code == 200
    assert again.content == first.content
    assert again.headers["x-playground-request-id"] == first.headers["x-playground-request-id"]
    assert again.headers["x-playground-cost-usd"] == first.headers["x-playground-cost-usd"]
    assert again.headers["idempotent-replayed"] == "true"
    assert other_body.status_code == 422
    assert other_body.json()["error"]["code"] == "idempotency_key_reused"
    assert len(fake_upstream.requests) == 1
    assert len(records_written(1, timeout=0.5)) == 1


def test_a_repeat_while_the_first_is_in_flight_gets_409_and_a_failed_first_can_be_retried(
    gateway: LiveApp, gateway_key: IssuedKey, fake_upstream: FakeUpstream
) -> None:
    slow = sse(
        [openai_chunk("late"), openai_chunk(finish_reason="stop"), usage_chunk(usage(3, 1))], first_delay=1.0
    )
    fake_upstream.script(slow)

    async def both() -> tuple[httpx.Response, httpx.Response]:
        async with httpx.AsyncClient(timeout=30) as client:
            url, headers = (
                gateway.url + "/v1/chat/completions",
                {**gateway_key.headers, "idempotency-key": "k1"},
            )
            first = asyncio.create_task(client.post(url, json=BODY, headers=headers))
            await fake_upstream.wait_requests(1)  # the first is in flight (its answer starts after 1 s)
            return await client.post(url, json=BODY, headers=headers), await first

    second, first = asyncio.run(both())
    assert first.status_code == 200
    assert second.status_code == 409 and second.json()["error"]["code"] == "idempotency_in_flight"

    fake_upstream.script(error(503), error(503), error(503))
    failed = _post(gateway, gateway_key, **{"idempotency-key": "k2"})
    retried = _post(gateway, gateway_key, **{"idempotency-key": "k2"})
    assert (failed.status_code, retried.status_code) == (503, 200)  # a 5xx is not kept: the retry is sent


def test_requests_per_minute_answer_429_with_retry_after_and_ratelimit_headers(
    gateway: LiveApp, actors: Actors, workers_connection: ProviderConnection, fake_upstream: FakeUpstream
) -> None:
    key = issue(actors, workers_connection, name="rpm-2", requests_per_minute=2)
    first, second, third = (_post(gateway, key) for _ in range(3))

    assert (first.status_code, second.status_code, third.status_code) == (200, 200, 429)
    assert first.headers["x-ratelimit-limit-requests"] == "2"
    assert first.headers["x-ratelimit-remaining-requests"] == "1"
    assert 1 <= int(third.headers["retry-after"]) <= 60
    assert third.headers["x-ratelimit-remaining-requests"] == "0"
    assert third.json()["error"]["type"] == "rate_limit_error"
    assert "2 requests a minute" in third.json()["error"]["message"]
    assert len(fake_upstream.requests) == 2


def test_tokens_per_minute_count_what_the_answers_used(
    gateway: LiveApp, actors: Actors, workers_connection: ProviderConnection, fake_upstream: FakeUpstream
) -> None:
    key = issue(actors, workers_connection, name="tpm-20", tokens_per_minute=20)
    for _ in range(2):
        fake_upstream.script(
            sse([openai_chunk("a"), openai_chunk(finish_reason="stop"), usage_chunk(usage(10, 5))])
        )
    statuses = [_post(gateway, key, {**BODY, "stream": True}).status_code for _ in range(2)]
    records_written(2)
    refused = _post(gateway, key)

    assert statuses == [200, 200]  # 15 tokens, then 30: the second was admitted with 5 left
    assert refused.status_code == 429 and "20 tokens a minute" in refused.json()["error"]["message"]


def test_upstream_failures_reach_the_client_in_its_shape_with_the_attempts_made(
    gateway: LiveApp, gateway_key: IssuedKey, fake_upstream: FakeUpstream, settings: LazySettings
) -> None:
    fake_upstream.script(
        error(429, retry_after=0.05), error(429, retry_after=0.05), error(429, retry_after=0.05)
    )
    limited = _post(gateway, gateway_key)
    fake_upstream.script(error(500))  # then the default answer
    recovered = _post(gateway, gateway_key)
    assert limited.status_code == 429 and limited.headers["x-playground-attempts"] == "3"
    assert limited.headers["retry-after"] == "1"
    assert limited.json()["error"]["type"] == "rate_limit_error"
    assert recovered.status_code == 200 and recovered.headers["x-playground-attempts"] == "2"

    settings.UPSTREAM_FIRST_TOKEN_TIMEOUT = 0.3
    settings.UPSTREAM_MAX_RETRIES = 0
    fake_upstream.script(hang(2))
    timed_out = httpx.post(
        gateway.url + f"/client/v4/accounts/x/ai/run/{KIMI}",
        json=BODY,
        headers=gateway_key.headers,
        timeout=30,
    )
    assert timed_out.status_code == 504
    assert timed_out.json()["success"] is False
    statuses = [r.status for r in records_written(3)]
    assert statuses == [UsageStatus.REJECTED, UsageStatus.OK, UsageStatus.TIMEOUT]


def test_a_stream_that_breaks_after_its_first_byte_ends_with_an_error_and_is_never_retried(
    oa: OpenAI, fake_upstream: FakeUpstream
) -> None:
    fake_upstream.script(sse([openai_chunk("half")], done=False, abort=True))
    received: list[str] = []
    with pytest.raises(openai.APIError) as raised:
        for chunk in oa.chat.completions.create(
            model=KIMI, messages=[{"role": "user", "content": "x"}], stream=True
        ):
            received.extend(choice.delta.content or "" for choice in chunk.choices)

    assert received == ["half"]
    assert "Upstream:" in str(raised.value)
    (record,) = records_written(1)
    assert len(fake_upstream.requests) == 1
    assert record.status == UsageStatus.UPSTREAM_ERROR and record.completion_tokens > 0


async def test_a_client_that_leaves_mid_stream_cancels_the_upstream_and_leaves_its_record(
    gateway: LiveApp, gateway_key: IssuedKey, fake_upstream: FakeUpstream
) -> None:
    fake_upstream.script(sse([openai_chunk(f"w{i} ") for i in range(50)], delay=0.05))
    async with (
        httpx.AsyncClient(timeout=30) as client,
        client.stream(
            "POST",
            gateway.url + "/v1/chat/completions",
            json={**BODY, "stream": True},
            headers=gateway_key.headers,
        ) as response,
    ):
        async for line in response.aiter_lines():
            if line.startswith("data:"):
                break  # hang up after the first chunk

    ended = await fake_upstream.wait_ended(0)
    assert ended.disconnected
    (record,) = await asyncio.to_thread(records_written, 1)
    assert record.status == UsageStatus.CLIENT_DISCONNECTED
    assert 0 < record.completion_tokens < 50


async def test_concurrent_requests_on_a_budget_that_covers_three_admit_at_most_three(
    gateway: LiveApp, actors: Actors, workers_connection: ProviderConnection, fake_upstream: FakeUpstream
) -> None:
    # worst case per request: ~2 prompt tokens x $0.95/M + 1000 x $4.00/M = about $0.004
    key = await asyncio.to_thread(
        issue, actors, workers_connection, name="covers-three", monthly_budget_usd=Decimal("0.0125")
    )
    slow = sse(
        [openai_chunk("ok"), openai_chunk(finish_reason="stop"), usage_chunk(usage(2, 1))], first_delay=0.5
    )
    for _ in range(20):
        fake_upstream.script(slow)
    async with httpx.AsyncClient(timeout=60) as client:
        responses = await asyncio.gather(
            *(
                client.post(
                    gateway.url + "/v1/chat/completions",
                    json={**BODY, "max_tokens": 1000},
                    headers=key.headers,
                )
                for _ in range(20)
            )
        )
    statuses = sorted(response.status_code for response in responses)
    assert statuses.count(200) <= 3 and statuses.count(200) >= 1
    assert statuses.count(402) == 20 - statuses.count(200)
    assert len(fake_upstream.requests) == statuses.count(200)
    assert len(await asyncio.to_thread(records_written, 20)) == 20


def test_a_whole_answer_goes_out_before_its_record_is_written_priced_as_the_record_is(
    gateway: LiveApp, gateway_key: IssuedKey, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The answer does not wait for the database: its cost comes from the card and the cost
    function the record uses, and the record follows."""
    writing, release = threading.Event(), threading.Event()

    def held(settled: Any) -> list[UsageRecord]:
        writing.set()
        release.wait(10)
        return usage_records_create_many(settled)

    monkeypatch.setattr(settle_queue, "usage_records_create_many", held)
    started = time.monotonic()
    answer = _post(gateway, gateway_key)
    answered_in = time.monotonic() - started

    assert answer.status_code == 200 and answered_in < 5
    assert writing.wait(5) and not UsageRecord.objects.exists()
    release.set()
    (record,) = records_written(1)
    assert str(record.request_id) == answer.headers["x-playground-request-id"]
    assert answer.headers["x-playground-cost-usd"] == f"{record.total_cost:.10f}"
    assert record.total_cost > 0


def test_a_client_that_hangs_up_on_reading_done_leaves_its_answer_metered_whole(
    gateway: LiveApp, gateway_key: IssuedKey, fake_upstream: FakeUpstream
) -> None:
    """The usage and the finish reach the meter before `[DONE]` reaches the client; the upstream
    here keeps the connection a moment after `[DONE]`, as a real one may."""
    frames: list[Frame] = [
        openai_chunk("Hi"),
        openai_chunk(finish_reason="stop"),
        usage_chunk(usage(7, 2)),
        "[DONE]",
        "",
    ]
    fake_upstream.script(sse(frames, delay=0.3, done=False))
    with httpx.stream(
        "POST",
        gateway.url + "/v1/chat/completions",
        json={**BODY, "stream": True},
        headers=gateway_key.headers,
        timeout=30,
    ) as response:
        lines = []
        for line in response.iter_lines():
            lines.append(line)
            if line == "data: [DONE]":
                break  # and hang up

    (record,) = records_written(1)
    assert any('"Hi"' in line for line in lines)
    assert (record.status, record.usage_source) == (UsageStatus.OK, "provider")
    assert (record.prompt_tokens, record.completion_tokens) == (7, 2)
