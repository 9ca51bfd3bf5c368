"""Prompt tokens counted by the model's tokenizer where one is known (`providers.tokenizers`), else
estimated (`usage.token_count`): tiktoken from the vendored files for OpenAI's models, the
engine's tokenize route (here a loopback fake speaking its wire format; the real engine's counts
are checked in tests/chat/test_preflight_counts.py), and the estimate for everything else."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from django.conf import LazySettings

from playground.providers.adapters import ChatRequest
from playground.providers.models import ConnectionKind, ProviderConnection
from playground.providers.tokenizers import (
    ENCODINGS,
    TIKTOKEN_FILES,
    tiktoken_encoding,
    tiktoken_encoding_name,
)
from playground.usage.token_count import TokenCount, prompt_tokens_count, prompt_tokens_counts
from tests.fakes.upstream import FakeUpstream, RecordedRequest, computed, error, json_reply

HELLO = [{"role": "user", "content": "hello world"}]


def request(model: str, messages: list[dict[str, Any]] = HELLO, **fields: Any) -> ChatRequest:
    return ChatRequest(model=model, messages=messages, **fields)


@pytest.fixture
def engine_on_fake(settings: LazySettings, fake_upstream: FakeUpstream, actors: Any) -> ProviderConnection:
    """The team's engine connection, the engine being the loopback fake."""
    settings.ENGINE_URL, settings.ENGINE_API_TOKEN = fake_upstream.url, "engine-token"
    return ProviderConnection.objects.create(team=actors.team, name="Engine", kind=ConnectionKind.ENGINE)


def counted_by_fake(seen: list[RecordedRequest]) -> Any:
    """A tokenize route that counts each request's characters, recording what it was sent."""

    def reply(sent: RecordedRequest) -> Any:
        seen.append(sent)
        counts = [{"prompt_tokens": len(json.dumps(each["messages"]))} for each in sent.json["requests"]]
        return json_reply({"model": sent.json["model"], "context_window": 2048, "requests": counts})

    return computed(reply)


def test_the_vendored_files_are_tiktokens_own() -> None:
    for name, vendored in ENCODINGS.items():
        data = (TIKTOKEN_FILES / f"{name}.tiktoken").read_bytes()
        assert hashlib.sha256(data).hexdigest() == vendored.sha256


@pytest.mark.parametrize(
    ("model", "encoding"),
    [
        ("gpt-4o", "o200k_base"),
        ("gpt-4o-mini-2024-07-18", "o200k_base"),
        ("gpt-4.1-mini", "o200k_base"),
        ("openai/gpt-4.1", "o200k_base"),
        ("o3-mini", "o200k_base"),
        ("gpt-4", "cl100k_base"),
        ("gpt-3.5-turbo", "cl100k_base"),
        ("gpt-oss-20b", None),  # harmony: not vendored
        ("@cf/moonshotai/kimi-k2.6", None),
        ("llama-3.3-70b", None),
    ],
)
def test_openai_models_map_to_their_encoding(model: str, encoding: str | None) -> None:
    assert tiktoken_encoding_name(model) == encoding


def test_the_encodings_give_tiktokens_published_tokens() -> None:
    """The ids tiktoken's own tests and OpenAI's tokenizer page give for these strings."""
    assert tiktoken_encoding("o200k_base").encode("hello world") == [24912, 2375]
    assert tiktoken_encoding("cl100k_base").encode("hello world") == [15339, 1917]
    assert tiktoken_encoding("cl100k_base").encode("tiktoken is great!") == [83, 1609, 5963, 374, 2294, 0]


@pytest.mark.django_db
def test_an_openai_model_is_counted_as_openai_frames_a_chat(openai_connection: ProviderConnection) -> None:
    """3 tokens a message and 3 for the answer's start, around the role's and the content's tokens."""
    messages = [{"role": "system", "content": "Be brief."}, *HELLO]

    count = prompt_tokens_count(connection=openai_connection, request=request("gpt-4o", messages))

    encoding = tiktoken_encoding("o200k_base")
    texts = ["system", "Be brief.", "user", "hello world"]
    assert count == TokenCount(3 + 2 * 3 + sum(len(encoding.encode(text)) for text in texts), counted=True)


@pytest.mark.django_db
def test_tools_and_a_schema_count_as_their_json(openai_connection: ProviderConnection) -> None:
    tool = {"type": "function", "function": {"name": "clock", "parameters": {"type": "object"}}}
    plain = prompt_tokens_count(connection=openai_connection, request=request("gpt-4.1"))

    with_tool = prompt_tokens_count(connection=openai_connection, request=request("gpt-4.1", tools=[tool]))

    assert with_tool.tokens == plain.tokens + len(tiktoken_encoding("o200k_base").encode(json.dumps([tool])))


@pytest.mark.django_db
def test_a_model_without_a_known_tokenizer_or_a_request_with_images_is_estimated(
    openai_connection: ProviderConnection, workers_connection: ProviderConnection
) -> None:
    image = [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:x"}}]}]

    counts = [
        prompt_tokens_count(connection=openai_connection, request=request("served/llama")),
        prompt_tokens_count(connection=workers_connection, request=request("gpt-4o")),  # Workers AI
        prompt_tokens_count(connection=openai_connection, request=request("gpt-4o", image)),
        prompt_tokens_count(connection=None, request=request("gpt-4o")),  # a deleted connection
    ]

    assert [count.basis for count in counts] == ["estimated"] * 4
    assert counts[0] == TokenCount(3, counted=False)  # 11 characters, about 4 a token


@pytest.mark.django_db
def test_the_engine_counts_the_body_the_adapter_sends_and_each_count_is_kept(
    engine_on_fake: ProviderConnection, fake_upstream: FakeUpstream
) -> None:
    seen: list[RecordedRequest] = []
    fake_upstream.script(counted_by_fake(seen))
    asked = request("@local/smollm2-135m-instruct", max_tokens=5, response_format={"type": "json_object"})

    first = prompt_tokens_count(connection=engine_on_fake, request=asked)
    again = prompt_tokens_count(connection=engine_on_fake, request=asked)

    assert first == again == TokenCount(len(json.dumps(HELLO)), counted=True)
    assert len(seen) == 1  # the second count came from the cache
    sent = seen[0]
    assert (sent.method, sent.path) == ("POST", "/engine/v1/tokenize")
    assert sent.headers["authorization"] == "Bearer engine-token"
    body = sent.json["requests"][0]
    assert sent.json["model"] == body["model"] == "@local/smollm2-135m-instruct"
    assert (body["messages"], body["max_tokens"], body["response_format"]) == (
        HELLO,
        5,
        {"type": "json_object"},
    )


@pytest.mark.django_db
def test_many_requests_go_in_chunks_and_keep_their_order(
    engine_on_fake: ProviderConnection, fake_upstream: FakeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("playground.providers.tokenizers.ENGINE_CHUNK_REQUESTS", 2)
    seen: list[RecordedRequest] = []
    fake_upstream.script(*[counted_by_fake(seen) for _ in range(3)])
    requests = [request("@local/m", [{"role": "user", "content": "x" * size}]) for size in range(1, 6)]

    counts = prompt_tokens_counts(connection=engine_on_fake, requests=requests)

    assert [len(each.json["requests"]) for each in seen] == [2, 2, 1]
    assert [count.tokens for count in counts] == [len(json.dumps(each.messages)) for each in requests]


@pytest.mark.django_db
def test_an_engine_that_fails_or_is_gone_leaves_the_estimate(
    engine_on_fake: ProviderConnection, fake_upstream: FakeUpstream, settings: LazySettings
) -> None:
    fake_upstream.script(error(400, body={"error": {"message": "No such model"}}))

    refused = prompt_tokens_count(connection=engine_on_fake, request=request("@local/m"))
    settings.ENGINE_URL = "http://127.0.0.1:9"  # nothing listens there
    gone = prompt_tokens_count(connection=engine_on_fake, request=request("@local/other"))

    assert refused == gone == TokenCount(3, counted=False)
