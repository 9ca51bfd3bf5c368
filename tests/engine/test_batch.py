"""The durable batch queue: `?queueRequest=true`, polling, and surviving restarts."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from cloudflare import BadRequestError, Cloudflare, NotFoundError

from tests.support.engine import EngineProcess, start_engine

ITEMS = [
    {"messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 4, "external_reference": "first"},
    {"prompt": "Count to three.", "max_tokens": 4, "external_reference": "second"},
]


def _submit(client: Cloudflare, model: str, requests: list[dict[str, Any]]) -> Any:
    return client.ai.run(
        model, account_id="test", extra_query={"queueRequest": "true"}, extra_body={"requests": requests}
    )


def _poll_until_done(client: Cloudflare, model: str, request_id: str, *, with_query: bool = True) -> Any:
    seen = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        query = {"queueRequest": "true"} if with_query else None
        result: Any = client.ai.run(
            model, account_id="test", extra_query=query, extra_body={"request_id": request_id}
        )
        if "responses" in result:
            return result
        seen.append(result["status"])
        assert result["status"] in ("queued", "running")
        assert result["request_id"] == request_id
        time.sleep(0.3)
    raise AssertionError(f"the batch did not finish; statuses seen: {seen}")


def _check_results(result: Any, model: str) -> None:
    responses = sorted(result["responses"], key=lambda response: response["id"])
    assert [response["id"] for response in responses] == [0, 1]
    assert [response["external_reference"] for response in responses] == ["first", "second"]
    assert all(response["success"] for response in responses)
    assert all(response["result"]["object"] == "chat.completion" for response in responses)
    assert all(response["result"]["model"] == model for response in responses)
    assert all(response["result"]["choices"][0]["message"]["content"] for response in responses)
    item_usage = [response["result"]["usage"] for response in responses]
    assert result["usage"]["completion_tokens"] == sum(usage["completion_tokens"] for usage in item_usage)
    assert result["usage"]["prompt_tokens"] == sum(usage["prompt_tokens"] for usage in item_usage)


def test_it_runs_a_queued_batch_to_completion_on_the_model_it_names(cf: Cloudflare, each_model: str) -> None:
    queued = _submit(cf, each_model, ITEMS)

    assert queued["status"] == "queued"
    assert queued["model"] == each_model
    # Cloudflare's docs poll both with and without the query parameter; both work here.
    _check_results(_poll_until_done(cf, each_model, queued["request_id"], with_query=False), each_model)
    _check_results(_poll_until_done(cf, each_model, queued["request_id"]), each_model)


def test_it_answers_an_unknown_request_id_with_not_found(cf: Cloudflare, engine: EngineProcess) -> None:
    with pytest.raises(NotFoundError) as caught:
        cf.ai.run(engine.model_id, account_id="test", extra_body={"request_id": "no-such-batch"})

    assert caught.value.response.json()["errors"][0]["code"] == 8001
    assert "no-such-batch" in caught.value.response.json()["errors"][0]["message"]


def test_it_refuses_a_batch_with_an_invalid_item(cf: Cloudflare, engine: EngineProcess) -> None:
    with pytest.raises(BadRequestError) as caught:
        _submit(cf, engine.model_id, [ITEMS[0], {"messages": []}])

    error = caught.value.response.json()["errors"][0]
    assert error["code"] == 8001
    assert error["message"].startswith("requests[1]: ")


def test_it_keeps_queued_and_finished_work_across_restarts(tmp_path: Path) -> None:
    queue_path = tmp_path / "queue.sqlite3"
    engine = start_engine(tmp_path, replicas=1, gemma_replicas=0, queue_path=queue_path)
    try:
        client = Cloudflare(base_url=f"{engine.url}/client/v4", api_token=engine.token, max_retries=0)
        request_id = _submit(client, engine.model_id, ITEMS)["request_id"]
    finally:
        engine.stop(hard=True)  # a crash, with the items queued or running

    engine = start_engine(tmp_path, replicas=1, gemma_replicas=0, queue_path=queue_path)
    try:
        client = Cloudflare(base_url=f"{engine.url}/client/v4", api_token=engine.token, max_retries=0)
        finished = _poll_until_done(client, engine.model_id, request_id)
        _check_results(finished, engine.model_id)
    finally:
        engine.stop()

    engine = start_engine(tmp_path, replicas=1, gemma_replicas=0, queue_path=queue_path)
    try:
        response = httpx.post(
            engine.run_url(), headers=engine.headers, json={"request_id": request_id}, timeout=30
        )
        assert response.json()["result"] == finished
    finally:
        engine.stop()


def test_it_serves_interactive_requests_before_queued_work(cf: Cloudflare, engine: EngineProcess) -> None:
    stories = [{"prompt": f"Tell story number {number}.", "max_tokens": 24} for number in range(8)]
    request_id = _submit(cf, engine.model_id, stories)["request_id"]

    answer: Any = cf.ai.run(engine.model_id, account_id="test", prompt="Hello", max_tokens=1)
    status: Any = cf.ai.run(engine.model_id, account_id="test", extra_body={"request_id": request_id})

    assert answer["usage"]["completion_tokens"] == 1
    assert status.get("status") in ("queued", "running")  # the interactive call did not wait for the batch
    assert len(_poll_until_done(cf, engine.model_id, request_id)["responses"]) == 8
