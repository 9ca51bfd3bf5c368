"""Prefix caches are kept apart per account id: one account's prompts never warm another's."""

from __future__ import annotations

import uuid
from typing import Any

import httpx

from tests.support.engine import EngineProcess

PROMPT = "Summarise the plot of a heist film about a museum in three sentences. Reference {}."


def ask(engine: EngineProcess, account: str, prompt: str, affinity: str) -> dict[str, Any]:
    response = httpx.post(
        f"{engine.url}/client/v4/accounts/{account}/ai/run/{engine.model_id}",
        headers={**engine.headers, "x-session-affinity": affinity},  # one replica, one cache
        json={"messages": [{"role": "user", "content": prompt}], "max_tokens": 2, "temperature": 0},
        timeout=60,
    )
    response.raise_for_status()
    return response.json()["result"]["usage"]


def test_a_prompt_sent_by_one_account_is_not_cached_for_another(engine: EngineProcess) -> None:
    prompt, affinity = PROMPT.format(uuid.uuid4().hex), f"ses_{uuid.uuid4().hex}"
    alpha, bravo = f"team-alpha-{uuid.uuid4().hex[:8]}", f"team-bravo-{uuid.uuid4().hex[:8]}"

    first = ask(engine, alpha, prompt, affinity)
    other = ask(engine, bravo, prompt, affinity)
    again = ask(engine, alpha, prompt, affinity)

    assert first["prompt_tokens_details"]["cached_tokens"] == 0
    assert other["prompt_tokens_details"]["cached_tokens"] == 0
    assert again["prompt_tokens_details"]["cached_tokens"] == again["prompt_tokens"] - 1


def test_a_batch_is_polled_only_by_the_account_that_queued_it(engine: EngineProcess) -> None:
    base = f"{engine.url}/client/v4/accounts/{{}}/ai/run/{engine.model_id}"
    queued = httpx.post(
        base.format("team-alpha") + "?queueRequest=true",
        headers=engine.headers,
        json={"requests": [{"prompt": "Hi", "max_tokens": 1}]},
        timeout=30,
    ).json()["result"]

    def poll(account: str) -> httpx.Response:
        return httpx.post(
            base.format(account),
            headers=engine.headers,
            json={"request_id": queued["request_id"]},
            timeout=30,
        )

    assert poll("team-bravo").status_code == 404
    assert poll("team-alpha").status_code == 200
