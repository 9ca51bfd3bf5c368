"""JSON answers that follow the requested schema on both local models (135M and 270M parameters)."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
from cloudflare import Cloudflare
from cloudflare.types.ai.ai_run_params import MessagesMessage
from openai import OpenAI

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 16},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "pet": {"type": "string", "enum": ["cat", "dog", "none"]},
    },
    "required": ["name", "age", "pet"],
    "additionalProperties": False,
}
ASK: list[MessagesMessage] = [{"role": "user", "content": "Invent a person."}]


def test_it_answers_json_that_validates_against_the_schema(cf: Cloudflare, each_model: str) -> None:
    result: Any = cf.ai.run(
        each_model,
        account_id="test",
        messages=ASK,
        max_tokens=48,
        temperature=0,
        response_format={"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON}},
    )

    assert result["choices"][0]["finish_reason"] == "stop"
    jsonschema.validate(json.loads(result["choices"][0]["message"]["content"]), PERSON)


def test_it_answers_a_json_object_in_json_object_mode(oa: OpenAI, each_model: str) -> None:
    completion = oa.chat.completions.create(
        model=each_model,
        messages=[{"role": "user", "content": "Describe a cat as JSON."}],
        response_format={"type": "json_object"},
        max_tokens=48,
        temperature=0,
        seed=7,
    )

    content = completion.choices[0].message.content or ""
    if completion.choices[0].finish_reason == "stop":
        assert isinstance(json.loads(content), dict)
    else:  # cut off by max_tokens: still the start of a JSON object
        assert content.startswith("{")
