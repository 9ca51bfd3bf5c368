from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import pytest

from playground.providers.adapters import ChatRequest
from playground.providers.adapters.openai_compat import OpenAICompatAdapter
from playground.providers.events import TextDelta, UpstreamError
from playground.providers.http import UpstreamHTTPError, parse_retry_after
from playground.providers.retry import retry_delay
from tests.fakes.upstream import FakeUpstream, collect, error, hang, openai_chunk, openai_error, sse

REQUEST = ChatRequest(model="m", messages=[{"role": "user", "content": "Hi"}])


@pytest.fixture(autouse=True)
def fast_retries(settings: Any) -> None:
    settings.UPSTREAM_MAX_RETRIES = 2
    settings.UPSTREAM_MAX_RETRY_AFTER = 0.05


async def run(fake: FakeUpstream) -> list[Any]:
    return await collect(OpenAICompatAdapter(base_url=fake.url, token="sk-retry-test").stream(REQUEST))


def text_of(events: list[Any]) -> str:
    return "".join(event.text for event in events if isinstance(event, TextDelta))


async def test_it_retries_a_429_after_the_retry_after_delay(
    fake_upstream: FakeUpstream, settings: Any
) -> None:
    settings.UPSTREAM_MAX_RETRY_AFTER = 5.0
    # Longer than the first backoff can be (0.25-0.5 s), so only honouring the header passes.
    fake_upstream.script(error(429, retry_after="1"))

    started = time.monotonic()
    events = await run(fake_upstream)

    assert time.monotonic() - started >= 1.0
    assert len(fake_upstream.requests) == 2
    assert text_of(events) == fake_upstream.default_text


async def test_a_retry_after_beyond_the_cap_fails_at_once_naming_the_wait(
    fake_upstream: FakeUpstream, settings: Any
) -> None:
    settings.UPSTREAM_MAX_RETRY_AFTER = 0.2
    fake_upstream.script(error(429, retry_after="120"))

    started = time.monotonic()
    events = await run(fake_upstream)

    assert time.monotonic() - started < 0.2
    assert len(fake_upstream.requests) == 1
    assert len(events) == 1 and isinstance(events[0], UpstreamError)
    assert events[0].http_status == 429
    assert events[0].code == "retry_after_too_long"
    assert "asked to wait 2 min before trying again" in events[0].message
    assert "not retried" in events[0].message


async def test_it_retries_server_errors_then_succeeds(fake_upstream: FakeUpstream) -> None:
    fake_upstream.script(error(503), error(502))

    events = await run(fake_upstream)

    assert len(fake_upstream.requests) == 3
    assert text_of(events) == fake_upstream.default_text


async def test_it_never_retries_a_400(fake_upstream: FakeUpstream) -> None:
    fake_upstream.script(error(400, openai_error("messages must not be empty")))

    events = await run(fake_upstream)

    assert len(fake_upstream.requests) == 1
    assert events == [
        UpstreamError(message="messages must not be empty", http_status=400, code="invalid_request_error")
    ]


async def test_it_stops_after_the_maximum_number_of_retries(fake_upstream: FakeUpstream) -> None:
    fake_upstream.script(*[error(503)] * 5)

    events = await run(fake_upstream)

    assert len(fake_upstream.requests) == 3
    assert len(events) == 1 and isinstance(events[0], UpstreamError)
    assert events[0].http_status == 503


async def test_it_reports_a_silent_upstream_as_a_timeout(fake_upstream: FakeUpstream, settings: Any) -> None:
    settings.UPSTREAM_FIRST_TOKEN_TIMEOUT = 0.2
    settings.UPSTREAM_MAX_RETRIES = 0
    fake_upstream.script(hang(5))

    events = await run(fake_upstream)

    assert len(events) == 1 and isinstance(events[0], UpstreamError)
    assert events[0].is_timeout
    assert events[0].http_status is None


async def test_it_retries_a_timeout_before_the_first_event(
    fake_upstream: FakeUpstream, settings: Any
) -> None:
    settings.UPSTREAM_FIRST_TOKEN_TIMEOUT = 0.2
    fake_upstream.script(sse([openai_chunk("late")], first_delay=2))

    events = await run(fake_upstream)

    assert len(fake_upstream.requests) == 2
    assert text_of(events) == fake_upstream.default_text


async def test_it_never_retries_once_events_were_yielded(fake_upstream: FakeUpstream, settings: Any) -> None:
    settings.UPSTREAM_TOTAL_TIMEOUT = 0.5
    fake_upstream.script(sse([openai_chunk("tick ")] * 20, delay=0.1))

    events = await run(fake_upstream)

    assert len(fake_upstream.requests) == 1
    assert text_of(events).startswith("tick tick ")
    assert isinstance(events[-1], UpstreamError)
    assert events[-1].is_timeout


async def test_it_reports_a_connection_dropped_mid_stream_without_retrying(
    fake_upstream: FakeUpstream,
) -> None:
    fake_upstream.script(sse([openai_chunk("Half")], done=False, abort=True))

    events = await run(fake_upstream)

    assert len(fake_upstream.requests) == 1
    assert events[0] == TextDelta("Half")
    assert isinstance(events[1], UpstreamError)
    assert events[1].code == "connection_error"
    assert len(events) == 2


async def test_it_retries_a_refused_connection_then_reports_it(settings: Any) -> None:
    fake = FakeUpstream()
    fake.start()
    fake.stop()  # nothing listens on its port any more

    events = await run(fake)

    assert len(events) == 1 and isinstance(events[0], UpstreamError)
    assert events[0].code == "connection_error"
    assert not events[0].is_timeout


def test_it_reads_retry_after_as_seconds_or_an_http_date() -> None:
    now = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)

    assert parse_retry_after("7", now=now) == 7.0
    assert parse_retry_after(format_datetime(now + timedelta(seconds=30), usegmt=True), now=now) == 30.0
    assert parse_retry_after(format_datetime(now - timedelta(seconds=30), usegmt=True), now=now) == 0.0
    assert parse_retry_after("soon", now=now) is None
    assert parse_retry_after(None) is None


def test_it_backs_off_exponentially_up_to_the_cap(settings: Any) -> None:
    settings.UPSTREAM_MAX_RETRY_AFTER = 3.0
    failure = UpstreamHTTPError("boom", status=503, retryable=True)

    first, third, tenth = (retry_delay(failure, attempt_number=n) for n in (0, 2, 9))

    assert 0.25 <= first <= 0.5
    assert 1.0 <= third <= 2.0
    assert 1.5 <= tenth <= 3.0
