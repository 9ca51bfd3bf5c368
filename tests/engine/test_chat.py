"""Plain answers, streams, usage and routing, through the official SDKs."""

from __future__ import annotations

from typing import Any

from cloudflare import Cloudflare
from cloudflare.types.ai.ai_run_params import MessagesMessage
from openai import OpenAI
from openai.types.chat import ChatCompletionMessageParam

from tests.engine.helpers import sse_payloads
from tests.support.engine import GEMMA, MODEL_ID, EngineProcess

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
    assert result["model"] == MODEL_ID
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


def test_it_lists_its_own_models_and_never_pretends_to_be_kimi(oa: OpenAI) -> None:
    assert [model.id for model in oa.models.list()] == [MODEL_ID, GEMMA]


def test_the_model_field_chooses_the_model_that_answers(oa: OpenAI, engine: EngineProcess) -> None:
    answers = {
        model: oa.chat.completions.create(model=model, messages=OA_QUESTION, max_tokens=8, temperature=0)
        for model in (MODEL_ID, GEMMA)
    }

    assert {model: completion.model for model, completion in answers.items()} == {
        MODEL_ID: MODEL_ID,
        GEMMA: GEMMA,
    }
    # Each model has its own tokenizer and chat template: the same question is another prompt.
    assert answers[MODEL_ID].usage != answers[GEMMA].usage
    gemma_replicas = {str(replica["index"]) for replica in engine.replicas_of(GEMMA)}
    raw = oa.chat.completions.with_raw_response.create(model=GEMMA, messages=OA_QUESTION, max_tokens=1)
    assert raw.headers["x-engine-replica"] in gemma_replicas


def test_the_default_model_answers_instead_of_continuing_the_text(
    cf: Cloudflare, engine: EngineProcess
) -> None:
    """The question issue 25 quotes: pretrained Gemma echoed it in a loop; SmolLM2 is instruction-tuned."""
    asked = "What is the capital of Finland?"
    result: Any = cf.ai.run(
        engine.model_id,
        account_id="test",
        messages=[{"role": "user", "content": asked}],
        max_tokens=24,
        temperature=0,
    )

    answer = result["choices"][0]["message"]["content"]
    assert "Helsinki" in answer and asked not in answer
    assert result["choices"][0]["finish_reason"] == "stop"  # it ended its answer by itself


def test_it_sends_the_system_prompt_and_counts_it(cf: Cloudflare, each_model: str) -> None:
    """SmolLM2's template has a system role; Gemma's has none, so the system prompt is folded into
    the first user turn. Either way it reaches the model and is billed as prompt."""
    short: MessagesMessage = {"role": "system", "content": "You teach geography."}
    long: MessagesMessage = {
        "role": "system",
        "content": "You teach geography to adults and always answer in one short, plain sentence.",
    }
    asked = [
        cf.ai.run(each_model, account_id="test", messages=[system, *QUESTION], max_tokens=1)
        for system in (short, long)
    ]

    # The longer system text (a dozen tokens more) is counted in the prompt.
    assert asked[1]["usage"]["prompt_tokens"] >= asked[0]["usage"]["prompt_tokens"] + 10  # type: ignore[index]


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
