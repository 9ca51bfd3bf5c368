"""The gateway's requests as spans: one per record at a loopback OTLP receiver, and nothing a
request waits for or loses when the collector hangs."""

from __future__ import annotations

import json
import select
import socket
import threading
import time

import httpx
import pytest

from playground.usage.telemetry import spans_flush
from tests.fakes.otlp import OtlpReceiver
from tests.fakes.upstream import FakeUpstream, json_reply
from tests.gateway.conftest import KIMI, IssuedKey, records_written
from tests.support.browser import LiveApp


def _answer(prompt: int) -> str:
    usage = {
        "prompt_tokens": prompt,
        "completion_tokens": 3,
        "total_tokens": prompt + 3,
        "prompt_tokens_details": {"cached_tokens": prompt // 2},
    }
    choice = {"index": 0, "message": {"role": "assistant", "content": "Hi"}, "finish_reason": "stop"}
    return json.dumps({"id": "chatcmpl-1", "object": "chat.completion", "choices": [choice], "usage": usage})


def _ask(gateway: LiveApp, key: IssuedKey, fake_upstream: FakeUpstream, prompt: int) -> float:
    """One non-streamed request through the gateway; its duration in seconds."""
    fake_upstream.script(json_reply(_answer(prompt), status=200))
    started = time.monotonic()
    response = httpx.post(
        gateway.url + "/v1/chat/completions",
        json={"model": KIMI, "messages": [{"role": "user", "content": "x"}]},
        headers=key.headers,
        timeout=30,
    )
    assert response.status_code == 200
    return time.monotonic() - started


def test_every_gateway_request_is_one_span_at_the_receiver(
    gateway: LiveApp, gateway_key: IssuedKey, fake_upstream: FakeUpstream, otlp_receiver: OtlpReceiver
) -> None:
    for prompt in (100, 200, 300):
        _ask(gateway, gateway_key, fake_upstream, prompt)
    records = records_written(3)
    assert spans_flush(timeout_millis=10_000)

    spans = otlp_receiver.by_record()
    assert len(otlp_receiver.spans) == 3
    for record in records:
        attributes = spans[str(record.request_id)].attributes
        assert attributes["gen_ai.provider.name"] == "cloudflare.workers_ai"
        assert attributes["gen_ai.request.model"] == record.model_id
        assert attributes["gen_ai.usage.input_tokens"] == record.prompt_tokens
        assert (
            attributes["gen_ai.usage.cache_read.input_tokens"]
            == record.cached_tokens
            == record.prompt_tokens // 2
        )
        assert attributes["gen_ai.usage.output_tokens"] == 3
        assert attributes["playground.cost.usd"] == float(record.total_cost) > 0


def test_a_hanging_collector_delays_no_request_and_costs_no_record(
    gateway: LiveApp,
    gateway_key: IssuedKey,
    fake_upstream: FakeUpstream,
    hanging_collector: socket.socket,
    caplog: pytest.LogCaptureFixture,
) -> None:
    _ask(gateway, gateway_key, fake_upstream, 100)
    records_written(1)
    # The record's span is queued once its transaction's commit hooks ran, a moment after the
    # record is visible; flush until a flush hangs on the collector (up to its 3 s timeout) ...
    hung: list[tuple[float, float]] = []

    def flush_until_it_hangs() -> None:
        deadline = time.monotonic() + 10
        while not hung and time.monotonic() < deadline:
            started = time.monotonic()
            spans_flush(timeout_millis=10_000)
            if time.monotonic() - started > 1.0:
                hung.append((started, time.monotonic()))
            time.sleep(0.02)

    flushing = threading.Thread(target=flush_until_it_hangs)
    flushing.start()
    readable, _, _ = select.select([hanging_collector], [], [], 10)
    assert readable, "the exporter never reached the collector"
    # ... while requests go on at their usual pace, each with its record.
    durations = [_ask(gateway, gateway_key, fake_upstream, prompt) for prompt in (200, 300, 400)]
    requests_ended = time.monotonic()
    records = records_written(4)
    flushing.join(timeout=20)

    assert max(durations) < 1.0, durations
    assert hung and hung[0][1] > requests_ended  # the exporter hung all the while
    assert [record.prompt_tokens for record in records] == [100, 200, 300, 400]
    assert all(record.status == "ok" and record.total_cost > 0 for record in records)
    assert "Failed to export spans batch" in caplog.text  # the spans were dropped, not the records
