"""The window each model really serves, and the tokenize route: a prompt counted as it would be billed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import llama_cpp
import pytest
from llama_cpp._internals import LlamaModel
from llama_cpp.llama_chat_format import Jinja2ChatFormatter

from playground.engine.model_file import smollm2_path
from tests.support.engine import GEMMA, MODEL_ID, REPO_ROOT, EngineProcess, start_engine

TEST_CONTEXT = 2048  # `spawn_engine`'s --context-size
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
CONVERSATION = [
    {"role": "system", "content": "You teach geography."},
    {"role": "user", "content": "What is the capital of France?"},
    {"role": "assistant", "content": "Paris."},
    {"role": "user", "content": "And of Italy? Ünïcode, emoji 🚀 and <|im_start|> as text."},
]


def tokenize(engine: EngineProcess, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{engine.url}/engine/v1/tokenize", headers=engine.headers, json=body, timeout=30)


def billed_prompt(engine: EngineProcess, body: dict[str, Any]) -> int:
    """`usage.prompt_tokens` of the same request, answered with one token."""
    response = httpx.post(
        f"{engine.url}/client/v4/accounts/test/ai/v1/chat/completions",
        headers=engine.headers,
        json={**body, "max_tokens": 1},
        timeout=120,
    )
    response.raise_for_status()
    return int(response.json()["usage"]["prompt_tokens"])


def test_the_model_list_says_each_models_context_window(engine: EngineProcess) -> None:
    response = httpx.get(
        f"{engine.url}/client/v4/accounts/test/ai/v1/models", headers=engine.headers, timeout=10
    )

    assert [(row["id"], row["context_window"]) for row in response.json()["data"]] == [
        (MODEL_ID, TEST_CONTEXT),
        (GEMMA, TEST_CONTEXT),
    ]


def test_each_model_serves_its_own_context_size_zero_its_trained_length(tmp_path: Path) -> None:
    engine = start_engine(
        tmp_path, replicas=1, gemma_replicas=1, context_size=0, args=("--gemma-context-size", "1024")
    )
    try:
        response = httpx.get(
            f"{engine.url}/client/v4/accounts/test/ai/v1/models", headers=engine.headers, timeout=10
        )
    finally:
        engine.stop()

    windows = [(row["id"], row["context_window"]) for row in response.json()["data"]]
    assert windows == [(MODEL_ID, 8192), (GEMMA, 1024)]  # SmolLM2 was trained on 8,192 tokens


@pytest.mark.parametrize(
    "extra",
    [{}, {"tools": [WEATHER_TOOL]}, {"response_format": {"type": "json_object"}}],
    ids=["messages", "tools", "json"],
)
def test_the_count_is_what_the_request_is_billed_at(
    engine: EngineProcess, each_model: str, extra: dict[str, Any]
) -> None:
    """Tools and a response format add their instructions to the system turn: counted too."""
    body = {"model": each_model, "messages": CONVERSATION, **extra}

    response = tokenize(engine, body)

    assert response.status_code == 200, response.text
    assert response.json() == {
        "model": each_model,
        "context_window": TEST_CONTEXT,
        "prompt_tokens": billed_prompt(engine, body),
    }


def test_the_count_equals_llama_cpps_own_for_the_rendered_prompt(engine: EngineProcess) -> None:
    """Rendered here by llama-cpp-python's formatter with the GGUF's own template, tokenized by
    llama.cpp: nothing of the engine's code in between."""
    params = llama_cpp.llama_model_default_params()
    params.vocab_only = True
    model = LlamaModel(
        path_model=str(smollm2_path(REPO_ROOT / "var" / "models")), params=params, verbose=False
    )
    formatter = Jinja2ChatFormatter(
        template=model.metadata()["tokenizer.chat_template"], bos_token="<|im_start|>", eos_token="<|im_end|>"
    )
    prompt = formatter(messages=CONVERSATION).prompt  # type: ignore[arg-type]

    own = len(model.tokenize(prompt.encode(), add_bos=model.add_bos_token(), special=True))

    assert tokenize(engine, {"model": MODEL_ID, "messages": CONVERSATION}).json()["prompt_tokens"] == own


def test_it_counts_many_requests_at_once(engine: EngineProcess) -> None:
    short = [{"role": "user", "content": "Hi"}]
    response = tokenize(
        engine, {"model": MODEL_ID, "requests": [{"messages": short}, {"messages": CONVERSATION}]}
    )

    assert response.status_code == 200
    counts = [row["prompt_tokens"] for row in response.json()["requests"]]
    assert counts == [
        tokenize(engine, {"model": MODEL_ID, "messages": short}).json()["prompt_tokens"],
        tokenize(engine, {"model": MODEL_ID, "messages": CONVERSATION}).json()["prompt_tokens"],
    ]


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ({"messages": CONVERSATION}, "`model` is required"),
        ({"model": "@cf/meta/llama-3.1-8b-instruct", "messages": CONVERSATION}, "No such model"),
        ({"model": MODEL_ID, "messages": []}, "`messages` must be a non-empty list"),
        (
            {"model": MODEL_ID, "requests": [{"messages": CONVERSATION}, {"prompt": ""}]},
            "requests[1]: `prompt`",
        ),
    ],
)
def test_bad_input_is_refused_with_its_reason(engine: EngineProcess, body: dict[str, Any], said: str) -> None:
    response = tokenize(engine, body)

    assert response.status_code == 400
    assert said in response.json()["error"]["message"]


def test_it_needs_the_engines_token(engine: EngineProcess) -> None:
    response = httpx.post(
        f"{engine.url}/engine/v1/tokenize", json={"model": MODEL_ID, "messages": CONVERSATION}, timeout=10
    )

    assert response.status_code == 401
