"""Bad input gets the right error shape, code and status, and the engine keeps serving."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import httpx
import openai
import pytest
from cloudflare import BadRequestError, Cloudflare
from cloudflare.types.ai.ai_run_params import MessagesMessage
from openai import OpenAI

from tests.engine.helpers import still_serves
from tests.support.engine import GEMMA, MODEL_ID, EngineProcess

HELLO: list[MessagesMessage] = [{"role": "user", "content": "Hello"}]
IMAGE = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}

# (what, body, HTTP status, Workers AI code, words the message must contain)
NATIVE_CASES: list[tuple[str, bytes | dict[str, Any], int, int, str]] = [
    ("malformed JSON", b'{"messages": [', 400, 8001, "not valid JSON"),
    ("an empty body", b"", 400, 3003, "no body"),
    ("a JSON list", b"[]", 400, 8001, "JSON object"),
    ("no messages or prompt", {"max_tokens": 3}, 400, 8001, "messages"),
    ("empty messages", {"messages": []}, 400, 8001, "non-empty"),
    ("an unknown role", {"messages": [{"role": "wizard", "content": "hi"}]}, 400, 8001, "role"),
    ("a message without content", {"messages": [{"role": "user"}]}, 400, 8001, "content"),
    (
        "a tool result without its call id",
        {"messages": [{"role": "tool", "content": "4"}]},
        400,
        8001,
        "tool_call_id",
    ),
    (
        "an image part",
        {"messages": [{"role": "user", "content": [{"type": "text", "text": "What is it?"}, IMAGE]}]},
        400,
        8001,
        "does not accept images",
    ),
    (
        "an invalid tool schema",
        {
            "messages": HELLO,
            "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "banana"}}}],
        },
        400,
        8001,
        "tools[0].function.parameters is not a valid JSON Schema",
    ),
    (
        "a tool_choice naming no tool",
        {"messages": HELLO, "tool_choice": {"type": "function", "function": {"name": "ghost"}}},
        400,
        8001,
        "ghost",
    ),
    (
        "an invalid response_format schema",
        {
            "messages": HELLO,
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "x", "schema": {"minLength": -1}},
            },
        },
        400,
        8001,
        "response_format.json_schema is not a valid JSON Schema",
    ),
    (
        "an unknown response_format",
        {"messages": HELLO, "response_format": {"type": "yaml"}},
        400,
        8001,
        "yaml",
    ),
    ("a temperature out of range", {"messages": HELLO, "temperature": 7}, 400, 8001, "temperature"),
    ("max_tokens of zero", {"messages": HELLO, "max_tokens": 0}, 400, 8001, "max_tokens"),
    (
        "a prompt longer than the context window",
        {"messages": [{"role": "user", "content": "lorem ipsum " * 1500}]},
        400,
        8001,
        "context window",
    ),
]


@pytest.mark.parametrize(
    ("what", "body", "status", "code", "words"), NATIVE_CASES, ids=[c[0] for c in NATIVE_CASES]
)
def test_it_refuses_bad_input_on_the_native_route(
    engine: EngineProcess, what: str, body: bytes | dict[str, Any], status: int, code: int, words: str
) -> None:
    content = body if isinstance(body, bytes) else httpx.Request("POST", "/", json=body).content
    response = httpx.post(engine.run_url(), headers=engine.headers, content=content, timeout=60)

    assert response.status_code == status
    assert response.json()["success"] is False and response.json()["result"] is None
    [error] = response.json()["errors"]
    assert error["code"] == code
    assert words in error["message"]
    assert still_serves(engine)


def test_it_refuses_an_unknown_model_through_the_cloudflare_sdk(
    cf: Cloudflare, engine: EngineProcess
) -> None:
    with pytest.raises(BadRequestError) as caught:
        cf.ai.run("@cf/moonshotai/kimi-k2.5", account_id="test", messages=HELLO)

    assert caught.value.status_code == 400
    [error] = caught.value.response.json()["errors"]
    assert error["code"] == 5007 and MODEL_ID in error["message"] and GEMMA in error["message"]
    assert still_serves(engine)


def test_it_uses_the_openai_error_shape_on_the_v1_route(oa: OpenAI, engine: EngineProcess) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        oa.chat.completions.create(model="@cf/moonshotai/kimi-k2.5", messages=HELLO)  # type: ignore[arg-type]

    assert caught.value.status_code == 400
    assert caught.value.body == {  # the SDK hands over the `error` object
        "message": (
            "No such model '@cf/moonshotai/kimi-k2.5'; this engine serves "
            "'@local/smollm2-135m-instruct' and '@local/gemma-3-270m'."
        ),
        "type": "invalid_request_error",
        "code": 5007,
    }


def test_it_refuses_a_body_over_the_size_limit(engine: EngineProcess) -> None:
    huge = b'{"prompt": "' + b"a" * 10_000_001 + b'"}'
    response = httpx.post(engine.run_url(), headers=engine.headers, content=huge, timeout=60)

    assert response.status_code == 413
    assert response.json()["errors"][0]["code"] == 3006
    assert still_serves(engine)


@pytest.mark.parametrize(
    "headers",
    [{}, {"authorization": "Bearer wrong-token"}, {"authorization": "Basic abc"}],
    ids=["no token", "a wrong token", "another scheme"],
)
def test_it_requires_the_api_token(engine: EngineProcess, headers: dict[str, str]) -> None:
    native = httpx.post(engine.run_url(), headers=headers, json={"messages": HELLO}, timeout=10)
    compatible = httpx.get(f"{engine.url}/client/v4/accounts/test/ai/v1/models", headers=headers, timeout=10)

    assert native.status_code == compatible.status_code == 401
    assert native.json()["errors"][0]["code"] == 10000
    assert compatible.json()["error"]["code"] == 10000
    assert engine.token not in native.text + compatible.text


def test_it_answers_an_unknown_route_with_a_routing_error(engine: EngineProcess) -> None:
    response = httpx.post(
        f"{engine.url}/client/v4/accounts/test/ai/v2/run", headers=engine.headers, timeout=10
    )

    assert response.status_code == 404
    assert response.json()["errors"][0]["code"] == 7000


def test_it_rejects_when_every_replica_is_busy_and_reject_if_busy_is_set(engine: EngineProcess) -> None:
    started = threading.Barrier(3)
    release = threading.Event()

    # The schema forbids the answer to end before 400 characters: the replica stays busy.
    long_story = {
        "type": "object",
        "properties": {"story": {"type": "string", "minLength": 400}},
        "required": ["story"],
    }
    body = {
        "messages": [{"role": "user", "content": "Tell a long story."}],
        "max_tokens": 400,
        "stream": True,
        "response_format": {"type": "json_schema", "json_schema": {"name": "story", "schema": long_story}},
    }

    def hold_a_replica() -> None:
        with httpx.stream(
            "POST", engine.run_url(), headers=engine.headers, json=body, timeout=60
        ) as response:
            lines = response.iter_lines()  # kept referenced: dropping it would close the stream
            for line in lines:  # wait for the first token: the replica is generating
                if '"content": "' in line and '"content": ""' not in line:
                    break
            started.wait()
            release.wait(timeout=60)  # closing the stream cancels the generation

    holders = [threading.Thread(target=hold_a_replica) for _ in range(2)]
    for holder in holders:
        holder.start()
    try:
        started.wait(timeout=60)
        assert all(replica["busy"] for replica in engine.replicas_of())
        busy = httpx.post(
            engine.run_url(),
            headers=engine.headers,
            json={"messages": HELLO, "max_tokens": 1, "options": {"rejectIfBusy": True}},
            timeout=60,
        )
    finally:
        release.set()
        for holder in holders:
            holder.join()

    assert busy.status_code == 429
    assert busy.json()["errors"] == [
        {"code": 3040, "message": "Capacity temporarily exceeded, please try again."}
    ]
    assert still_serves(engine)


def _status_of(call: Callable[[], object]) -> int:
    try:
        call()
    except openai.APIStatusError as exc:
        return exc.status_code
    return 200


def test_it_waits_instead_of_rejecting_without_reject_if_busy(oa: OpenAI, engine: EngineProcess) -> None:
    def ask() -> object:
        return oa.chat.completions.create(model=engine.model_id, messages=HELLO, max_tokens=8)  # type: ignore[arg-type]

    statuses: list[int] = []
    threads = [threading.Thread(target=lambda: statuses.append(_status_of(ask))) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert statuses == [200, 200, 200, 200]
