"""Model ids follow a strict pattern and are encoded wherever they enter a URL (issue 8 J)."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from playground.providers.adapters import ChatRequest
from playground.providers.adapters.workers_ai import WorkersAIAdapter
from playground.providers.model_ids import model_id_validate

VALID = [
    "@cf/moonshotai/kimi-k2.5",
    "@local/smollm2-135m-instruct",
    "@local/gemma-3-270m",
    "@hf/thebloke/deepseek-coder-6.7b-instruct-awq",
    "gpt-4.1-mini",
    "ft:gpt-4o-mini:org::abc123",
    "meta-llama/Llama-3.1-8B-Instruct:free",
    "accounts/fireworks/models/llama-v3p1-8b-instruct",
]
HOSTILE = [
    "../../accounts/other/ai/run/@cf/x",
    "@local/../../../healthz",
    "./x",
    "a//b",
    "/absolute",
    "trailing/",
    "model?queueRequest=true",
    "model#fragment",
    "model%2F..%2Fx",
    "model with spaces",
    "model\nX-Injected: 1",
    "",
    "x" * 201,
]


@pytest.mark.parametrize("model_id", VALID)
def test_every_providers_id_shape_is_accepted(model_id: str) -> None:
    model_id_validate(model_id)


@pytest.mark.parametrize("model_id", HOSTILE)
def test_ids_that_could_change_the_request_path_are_refused(model_id: str) -> None:
    with pytest.raises(ValidationError):
        model_id_validate(model_id)


def test_the_workers_ai_path_keeps_a_valid_id_and_encodes_the_account() -> None:
    adapter = WorkersAIAdapter(
        base_url="https://api.example.test/client/v4", account_id="a/../b?x", token="t"
    )

    url = adapter.endpoint(ChatRequest(model="@cf/meta/llama-3.1-8b-instruct", messages=[]))

    assert (
        url
        == "https://api.example.test/client/v4/accounts/a%2F..%2Fb%3Fx/ai/run/@cf/meta/llama-3.1-8b-instruct"
    )


@pytest.mark.parametrize("model_id", ["../../healthz", "m?queueRequest=true"])
def test_the_workers_ai_adapter_never_builds_a_path_from_a_hostile_id(model_id: str) -> None:
    adapter = WorkersAIAdapter(base_url="https://api.example.test/client/v4", account_id="acc", token="t")

    with pytest.raises(ValidationError):
        adapter.endpoint(ChatRequest(model=model_id, messages=[]))
