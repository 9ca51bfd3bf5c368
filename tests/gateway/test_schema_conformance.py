"""A gateway request that asks for a JSON schema gets a record saying whether the answer held to it."""

from __future__ import annotations

from typing import Any

import httpx

from tests.fakes.upstream import (
    FakeUpstream,
    chat_completion,
    json_reply,
    openai_chunk,
    sse,
    usage,
    usage_chunk,
)
from tests.gateway.conftest import KIMI, IssuedKey, records_written
from tests.support.browser import LiveApp

INVOICE = {
    "type": "json_schema",
    "json_schema": {
        "name": "invoice",
        "strict": True,
        "schema": {
            "type": "object",
            "properties": {
                "total": {"type": "number"},
                "lines": {"type": "array", "items": {"type": "string"}},
            },
            "required": ["total", "lines"],
        },
    },
}


def _body(**more: Any) -> dict[str, Any]:
    return {
        "model": KIMI,
        "messages": [{"role": "user", "content": "Bill it."}],
        "response_format": INVOICE,
        **more,
    }


def test_a_whole_answer_that_breaks_the_schema_is_recorded_invalid_with_its_error_path(
    gateway: LiveApp, gateway_key: IssuedKey, fake_upstream: FakeUpstream
) -> None:
    fake_upstream.script(
        json_reply(chat_completion('{"total": "12.50", "lines": []}', usage_body=usage(30, 9)))
    )

    response = httpx.post(gateway.url + "/v1/chat/completions", json=_body(), headers=gateway_key.headers)

    assert response.status_code == 200
    (record,) = records_written(1)
    assert (record.schema_name, record.schema_valid) == ("invoice", False)
    assert record.schema_errors == [{"path": "$.total", "message": "'12.50' is not of type 'number'"}]


def test_a_streamed_answer_is_judged_whole_once_it_ends(
    gateway: LiveApp, gateway_key: IssuedKey, fake_upstream: FakeUpstream
) -> None:
    pieces = ['{"total": 12.5, ', '"lines": ["tea", ', "2]}"]
    fake_upstream.script(
        sse(
            [
                *(openai_chunk(piece) for piece in pieces),
                openai_chunk(finish_reason="stop"),
                usage_chunk(usage(30, 12)),
            ]
        )
    )

    with httpx.stream(
        "POST", gateway.url + "/v1/chat/completions", json=_body(stream=True), headers=gateway_key.headers
    ) as response:
        assert response.status_code == 200
        response.read()

    (record,) = records_written(1)
    assert (record.schema_name, record.schema_valid) == ("invoice", False)
    assert record.schema_errors == [{"path": "$.lines[1]", "message": "2 is not of type 'string'"}]


def test_a_request_without_a_json_format_is_not_judged(
    gateway: LiveApp, gateway_key: IssuedKey, fake_upstream: FakeUpstream
) -> None:
    fake_upstream.script(json_reply(chat_completion("not JSON at all", usage_body=usage(30, 4))))
    body = {"model": KIMI, "messages": [{"role": "user", "content": "Hi."}]}

    assert httpx.post(gateway.url + "/v1/chat/completions", json=body, headers=gateway_key.headers).is_success

    (record,) = records_written(1)
    assert (record.schema_name, record.schema_valid, record.schema_errors) == ("", None, None)
