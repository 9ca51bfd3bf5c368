"""Plain answers, streams, usage and routing, through the official SDKs."""

from __future__ import annotations

from typing import Any

from cloudflare import Cloudflare
from cloudflare.types.ai.ai_run_params import MessagesMessage
from openai import OpenAI
from openai.types.chat import ChatCompletionMessageParam

from tests.engine.helpers import sse_payloads
from tests.support.engine import EngineProcess

ASKED = "What is the capital of France?"
# Each SDK types its messages its own way (OpenAI's roles are literals), so one list per SDK.
QUESTION: list[MessagesMessage] = [{"role": "user", "content": ASKED}]
OA_QUESTION: list[ChatCompletionMessageParam] = [{"role": "user", "content": ASKED}]


def _check_usage(usage: dict[str, Any], *, max_completion: int) -> None:
    assert usage["prompt_tokens"] > 0
    assert 0 < usage["completion_tokens"] <= max_completion
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert 0 <= usage["prompt_tokens_details"]["cached_tokens"] < usage["prompt_tokens"]


def test_it_answers_a_plain_question_through_the_cloudflare_sdk(
    cf: Cloudflare, engine: EngineProcess
) -> None:
    result: Any = cf.ai.run(
        engine.model_id, account_id="test", messages=QUESTION, max_tokens=12, temperature=0
    )

    assert result["object"] == "chat.completion"
    assert result["model"] == "@local/gemma-3-270m"
    choice = result["choices"][0]
    assert choice["message"]["role"] == "assistant"
    assert isinstance(choice["message"]["content"], str) and choice["message"]["content"].strip()
    assert choice["finish_reason"] in ("stop", "length")
    _check_usage(result["usage"], max_completion=12)


def test_it_streams_chunks_then_a_usage_frame_then_done(cf: Cloudflare, engine: EngineProcess) -> None:
    with cf.ai.with_streaming_response.run(
        engine.model_id, account_id="test", messages=QUESTION, max_tokens=8, temperature=0, stream=True
    ) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        payloads = sse_payloads(response.iter_lines())

    assert payloads[-1] == "[DONE]"
    usage_frame, finish_frame, *_ = reversed(payloads[:-1])
    assert usage_frame["choices"] == []
    _check_usage(usage_frame["usage"], max_completion=8)
    assert finish_frame["choices"][0]["finish_reason"] in ("stop", "length")
    chunks = payloads[:-3]
    assert all(chunk["object"] == "chat.completion.chunk" for chunk in chunks)
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    text = "".join(chunk["choices"][0]["delta"].get("content", "") for chunk in chunks)
    assert text.strip()
    assert len(chunks) - 1 == usage_frame["usage"]["completion_tokens"]  # one chunk per token here


def test_it_gives_the_same_greedy_answer_streamed_or_not(cf: Cloudflare, engine: EngineProcess) -> None:
    whole: Any = cf.ai.run(engine.model_id, account_id="test", messages=QUESTION, max_tokens=8, temperature=0)
    with cf.ai.with_streaming_response.run(
        engine.model_id, account_id="test", messages=QUESTION, max_tokens=8, temperature=0, stream=True
    ) as response:
        chunks = sse_payloads(response.iter_lines())[:-3]

    streamed = "".join(chunk["choices"][0]["delta"].get("content", "") for chunk in chunks)
    assert streamed == whole["choices"][0]["message"]["content"]


def test_it_serves_plain_openai_objects_on_the_v1_route(oa: OpenAI, engine: EngineProcess) -> None:
    completion = oa.chat.completions.create(
        model=engine.model_id, messages=OA_QUESTION, max_tokens=8, temperature=0
    )

    assert completion.object == "chat.completion"
    assert completion.choices[0].message.content
    assert completion.usage is not None
    assert (
        completion.usage.total_tokens == completion.usage.prompt_tokens + completion.usage.completion_tokens
    )
    assert completion.usage.prompt_tokens_details is not None
    assert completion.usage.prompt_tokens_details.cached_tokens is not None


def test_it_sends_a_usage_chunk_on_the_v1_route_only_when_asked(oa: OpenAI, engine: EngineProcess) -> None:
    with_usage = list(
        oa.chat.completions.create(
            model=engine.model_id,
            messages=OA_QUESTION,
            max_tokens=4,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    without = list(
        oa.chat.completions.create(model=engine.model_id, messages=OA_QUESTION, max_tokens=4, stream=True)
    )

    assert with_usage[-1].choices == [] and with_usage[-1].usage is not None
    assert with_usage[-1].usage.completion_tokens == 4
    assert all(chunk.usage is None for chunk in without)
    assert without[-1].choices[0].finish_reason == "length"


def test_it_lists_its_own_model_and_never_pretends_to_be_kimi(oa: OpenAI) -> None:
    assert [model.id for model in oa.models.list()] == ["@local/gemma-3-270m"]


def test_it_folds_the_system_prompt_into_the_first_turn_and_counts_it(
    cf: Cloudflare, engine: EngineProcess
) -> None:
    system: MessagesMessage = {
        "role": "system",
        "content": "You are a geography teacher who answers in one short sentence.",
    }
    bare: Any = cf.ai.run(engine.model_id, account_id="test", messages=QUESTION, max_tokens=1)
    with_system: Any = cf.ai.run(
        engine.model_id, account_id="test", messages=[system, *QUESTION], max_tokens=1
    )

    # The system text (about a dozen tokens) reaches the model and is billed as prompt.
    assert with_system["usage"]["prompt_tokens"] >= bare["usage"]["prompt_tokens"] + 10


def test_it_stops_at_a_stop_sequence(oa: OpenAI, engine: EngineProcess) -> None:
    free = oa.chat.completions.create(
        model=engine.model_id, messages=OA_QUESTION, max_tokens=12, temperature=0
    )
    text = free.choices[0].message.content or ""
    stop = text.split()[1]  # a word the greedy answer is known to contain

    stopped = oa.chat.completions.create(
        model=engine.model_id, messages=OA_QUESTION, max_tokens=12, temperature=0, stop=[stop]
    )

    assert stopped.choices[0].message.content == text[: text.index(stop)]
    assert stopped.choices[0].finish_reason == "stop"


def test_it_reuses_the_cache_on_a_second_turn_with_session_affinity(
    cf: Cloudflare, engine: EngineProcess
) -> None:
    affinity = {"x-session-affinity": "ses_cache_test"}
    first = cf.ai.with_raw_response.run(
        engine.model_id,
        account_id="test",
        messages=QUESTION,
        max_tokens=8,
        temperature=0,
        extra_headers=affinity,
    )
    answer: Any = first.parse()
    history: list[MessagesMessage] = [
        *QUESTION,
        {"role": "assistant", "content": answer["choices"][0]["message"]["content"]},
        {"role": "user", "content": "And the capital of Italy?"},
    ]
    second = cf.ai.with_raw_response.run(
        engine.model_id,
        account_id="test",
        messages=history,
        max_tokens=8,
        temperature=0,
        extra_headers=affinity,
    )
    usage = second.parse()["usage"]  # type: ignore[index]

    assert second.headers["x-engine-replica"] == first.headers["x-engine-replica"]
    # Everything up to the end of the first answer was kept in the replica's KV cache.
    assert usage["prompt_tokens_details"]["cached_tokens"] >= answer["usage"]["prompt_tokens"]
    assert usage["prompt_tokens_details"]["cached_tokens"] < usage["prompt_tokens"]


def test_it_spreads_requests_without_affinity_over_the_replicas(
    cf: Cloudflare, engine: EngineProcess
) -> None:
    replicas = [
        cf.ai.with_raw_response.run(
            engine.model_id, account_id="test", messages=QUESTION, max_tokens=1
        ).headers["x-engine-replica"]
        for _ in range(4)
    ]

    assert replicas[0] != replicas[1] and replicas[:2] == replicas[2:]
