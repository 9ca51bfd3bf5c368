from __future__ import annotations

import asyncio
import logging
import ssl
from typing import Any

import pytest

from playground.providers.adapters import ChatRequest
from playground.providers.adapters.workers_ai import WorkersAIAdapter
from playground.providers.events import TextDelta, UpstreamError
from playground.providers.http import UpstreamHTTPError, pooled_client, upstream_stream
from tests.fakes.upstream import (
    FakeUpstream,
    collect,
    error,
    json_reply,
    native_frame,
    paced,
    redirect,
    sse,
    v4_error,
)

TOKEN = "cf-secret-token-a1b2c3d4e5f6"
REQUEST = ChatRequest(
    model="@cf/meta/llama", messages=[{"role": "user", "content": "Hi"}], affinity_key="ses_1"
)


def adapter(fake: FakeUpstream) -> WorkersAIAdapter:
    return WorkersAIAdapter(base_url=fake.workers_base_url, account_id="acc", token=TOKEN)


async def test_it_does_not_follow_redirects(fake_upstream: FakeUpstream) -> None:
    fake_upstream.script(redirect(fake_upstream.url + "/elsewhere"))

    events = await collect(adapter(fake_upstream).stream(REQUEST))

    assert [request.path for request in fake_upstream.requests] == [
        "/client/v4/accounts/acc/ai/run/@cf/meta/llama"
    ]
    assert len(events) == 1 and isinstance(events[0], UpstreamError)
    assert events[0].http_status == 302
    assert "redirect" in events[0].message


async def test_a_cookie_an_upstream_set_does_not_go_with_the_next_request(
    fake_upstream: FakeUpstream,
) -> None:
    fake_upstream.script(
        json_reply({"ok": 1}, headers={"set-cookie": "session=team-a; Path=/"}), json_reply({"ok": 2})
    )

    for _ in range(2):  # the pooled client serves every team's calls to that host
        async with upstream_stream("POST", fake_upstream.url + "/v1/x", headers={}, json={}) as response:
            await response.read()

    assert [request.headers.get("cookie") for request in fake_upstream.requests] == [None, None]


async def test_it_never_logs_the_token(
    fake_upstream: FakeUpstream, caplog: pytest.LogCaptureFixture, settings: Any
) -> None:
    settings.UPSTREAM_MAX_RETRY_AFTER = 0.01
    caplog.set_level(logging.DEBUG)
    fake_upstream.script(
        error(503),
        sse([native_frame("ok")]),
        error(401, v4_error(10000, f"Authentication error for {TOKEN}")),
    )

    await collect(adapter(fake_upstream).stream(REQUEST))
    failed = await collect(adapter(fake_upstream).stream(REQUEST))

    assert isinstance(failed[-1], UpstreamError)
    assert caplog.records, "the seam and httpx log at DEBUG, so there is something to check"
    assert all(TOKEN not in record.getMessage() for record in caplog.records)
    assert TOKEN not in caplog.text


async def test_it_raises_its_own_error_for_an_error_status(fake_upstream: FakeUpstream) -> None:
    fake_upstream.script(error(429, retry_after="3", headers={"cf-ray": "ray-1"}))

    with pytest.raises(UpstreamHTTPError) as caught:
        async with upstream_stream("POST", fake_upstream.url + "/x", headers={}, json={}):
            pass

    assert caught.value.status == 429
    assert caught.value.retry_after == 3.0
    assert caught.value.retryable
    assert caught.value.request_id == "ray-1"
    assert '"code": 3040' in caught.value.body


async def test_it_uses_one_pooled_client_per_event_loop_and_closes_it_with_the_loop() -> None:
    here = await pooled_client()
    elsewhere = await asyncio.to_thread(asyncio.run, pooled_client())

    assert await pooled_client() is here
    assert elsewhere is not here
    assert elsewhere.is_closed
    assert not here.is_closed
    assert here.follow_redirects is False


def test_clients_of_new_event_loops_do_not_load_the_ca_bundle_again(monkeypatch: pytest.MonkeyPatch) -> None:
    asyncio.run(pooled_client())  # the first client may build the shared TLS context
    loads: list[object] = []
    monkeypatch.setattr(ssl.SSLContext, "load_verify_locations", lambda *args, **kwargs: loads.append(args))

    clients = [asyncio.run(pooled_client()) for _ in range(3)]  # each loop its own client

    assert len({id(client) for client in clients}) == 3
    assert loads == []  # a Celery step runs its own loop: tens of ms of CPU each time before


async def test_cancelling_the_consumer_closes_the_upstream_stream(fake_upstream: FakeUpstream) -> None:
    fake_upstream.script(paced(200, every_ms=20))
    first_text = asyncio.Event()

    async def consume() -> None:
        async for event in adapter(fake_upstream).stream(REQUEST):
            if isinstance(event, TextDelta):
                first_text.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(first_text.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    served = await fake_upstream.wait_ended(0)
    assert served.disconnected


async def test_closing_the_event_stream_closes_the_upstream_stream(fake_upstream: FakeUpstream) -> None:
    fake_upstream.script(paced(200, every_ms=20))
    events = adapter(fake_upstream).stream(REQUEST)

    first = await anext(events)
    await events.aclose()

    assert isinstance(first, TextDelta) and first.text.startswith("t=")
    served = await fake_upstream.wait_ended(0)
    assert served.disconnected
