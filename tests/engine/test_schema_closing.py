"""JSON answers cut short by `max_tokens` are closed by the engine, on both local models."""

from __future__ import annotations

import json
from typing import Any

import httpx
import jsonschema
import openai
import pytest
from openai import OpenAI
from openai.types.chat import ChatCompletionUserMessageParam
from openai.types.shared_params import ResponseFormatJSONSchema

from tests.engine.helpers import sse_payloads
from tests.support.engine import EngineProcess

CITY: dict[str, Any] = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "sights": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}}}},
        "facts": {"type": "array", "items": {"type": "array", "items": {"type": "string"}}},
    },
    "required": ["city"],  # its smallest answer, {"city":""}, takes 5 tokens on either model
    "additionalProperties": False,
}
ASK: list[ChatCompletionUserMessageParam] = [
    {"role": "user", "content": "Describe Paris in great detail: its sights and many facts."}
]
FORMAT: ResponseFormatJSONSchema = {"type": "json_schema", "json_schema": {"name": "city", "schema": CITY}}


def ask(engine: EngineProcess, model: str, max_tokens: int, **extra: Any) -> httpx.Response:
    body = {"messages": ASK, "max_tokens": max_tokens, "response_format": FORMAT, "temperature": 0, **extra}
    return httpx.post(engine.run_url(model), headers=engine.headers, json=body, timeout=120)


@pytest.mark.parametrize("max_tokens", [8, 16, 32, 80])
def test_a_schema_answer_parses_and_validates_at_any_max_tokens(
    engine: EngineProcess, each_model: str, max_tokens: int
) -> None:
    result = ask(engine, each_model, max_tokens).json()["result"]
    choice = result["choices"][0]

    jsonschema.validate(json.loads(choice["message"]["content"]), CITY)
    assert result["usage"]["completion_tokens"] <= max_tokens
    if choice["finish_reason"] == "length":
        assert choice["closed_early"]["schema_error"] is None
        assert choice["message"]["content"].endswith(choice["closed_early"]["appended"])
    else:
        assert "closed_early" not in choice
    if max_tokens == 8:  # far too few for this prompt: the answer must have been closed
        assert choice["finish_reason"] == "length" and choice["closed_early"]["appended"]


def test_a_streamed_schema_answer_cut_short_ends_with_its_closing(
    engine: EngineProcess, each_model: str
) -> None:
    body = {"messages": ASK, "max_tokens": 16, "response_format": FORMAT, "stream": True, "temperature": 0}
    with httpx.stream(
        "POST", engine.run_url(each_model), headers=engine.headers, json=body, timeout=120
    ) as r:
        payloads = sse_payloads(r.iter_lines())
    chunks = [payload for payload in payloads if isinstance(payload, dict) and payload["choices"]]
    text = "".join(chunk["choices"][0]["delta"].get("content", "") for chunk in chunks)
    last = chunks[-1]["choices"][0]

    jsonschema.validate(json.loads(text), CITY)
    assert last["finish_reason"] == "length"
    assert chunks[-2]["choices"][0]["delta"]["content"] == last["closed_early"]["appended"]
    assert last["closed_early"]["schema_error"] is None


def test_a_json_object_answer_cut_short_still_parses(oa: OpenAI, each_model: str) -> None:
    completion = oa.chat.completions.create(
        model=each_model,
        messages=[{"role": "user", "content": "Describe a cat as JSON, with every detail you know."}],
        response_format={"type": "json_object"},
        max_tokens=12,
        temperature=0,
    )
    choice = completion.choices[0]

    assert isinstance(json.loads(choice.message.content or ""), dict)
    assert choice.finish_reason == "length"
    assert (choice.model_extra or {})["closed_early"]["schema_error"] is None


def test_max_tokens_too_small_for_the_schema_is_refused_naming_the_minimum(
    engine: EngineProcess, oa: OpenAI
) -> None:
    for stream in (False, True):
        response = ask(engine, engine.model_id, 1, stream=stream)

        assert response.status_code == 400
        message = response.json()["errors"][0]["message"]
        assert '{"city":""}' in message and "max_tokens of at least" in message

    with pytest.raises(openai.BadRequestError, match="max_tokens of at least"):
        oa.chat.completions.create(
            model=engine.model_id,
            messages=ASK,
            max_tokens=1,
            response_format=FORMAT,
        )
