"""A chat request body (Workers AI `/ai/run` or OpenAI `/v1/chat/completions`) -> a checked job.

All validation happens here, in the front end, so bad input is answered at once with
error 8001 and a message that names the offending field.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from playground.engine.errors import invalid_input
from playground.engine.messages import normalize_messages, prompt_messages, with_system_note
from playground.engine.output import plan_output
from playground.engine.protocol import GenerationSpec


@dataclass(frozen=True)
class ChatRequest:
    spec: GenerationSpec
    stream: bool
    include_usage: bool  # OpenAI route: send a usage chunk at the end of a stream
    reject_if_busy: bool


def parse_chat(body: Mapping[str, Any], *, model_id: str, default_max_tokens: int) -> ChatRequest:
    if "messages" in body:
        turns = normalize_messages(body["messages"], model_id=model_id)
    elif "prompt" in body:
        turns = prompt_messages(body["prompt"])
    else:
        raise invalid_input("Send either `messages` (a non-empty list) or `prompt` (a string).")
    if body.get("n", 1) != 1:
        raise invalid_input("Only one choice per request is supported (`n` must be 1).")
    if body.get("logprobs"):
        raise invalid_input("`logprobs` is not supported by this engine.")
    plan = plan_output(body)
    max_tokens = body.get("max_completion_tokens")
    if max_tokens is None:
        max_tokens = body.get("max_tokens")
    spec = GenerationSpec(
        messages=with_system_note(turns, plan.system_note),
        max_tokens=default_max_tokens if max_tokens is None else _integer("max_tokens", max_tokens, low=1),
        temperature=_number(body, "temperature", 1.0, low=0.0, high=2.0),
        top_p=_number(body, "top_p", 1.0, low=0.0, high=1.0),
        seed=None if body.get("seed") is None else _integer("seed", body["seed"], low=0),
        stop=_stop(body.get("stop")),
        mode=plan.mode,
        grammar=plan.grammar,
        response_schema=plan.response_schema,
        tool_schemas=plan.tool_schemas,
    )
    return ChatRequest(
        spec=spec,
        stream=_flag(body, "stream", body.get("stream")),
        include_usage=_flag(
            body, "stream_options.include_usage", _get(body, "stream_options", "include_usage")
        ),
        reject_if_busy=_flag(body, "options.rejectIfBusy", _get(body, "options", "rejectIfBusy")),
    )


def _get(body: Mapping[str, Any], outer: str, inner: str) -> Any:
    nested = body.get(outer)
    if nested is None:
        return None
    if not isinstance(nested, Mapping):
        raise invalid_input(f"`{outer}` must be an object.")
    return nested.get(inner)


def _flag(body: Mapping[str, Any], name: str, value: Any) -> bool:
    if value is None:
        return False
    if not isinstance(value, bool):
        raise invalid_input(f"`{name}` must be true or false.")
    return value


def _integer(name: str, value: Any, *, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise invalid_input(f"`{name}` must be an integer of at least {low}; got {value!r}.")
    return value


def _number(body: Mapping[str, Any], name: str, default: float, *, low: float, high: float) -> float:
    value = body.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise invalid_input(f"`{name}` must be a number from {low:g} to {high:g}; got {value!r}.")
    return float(value)


def _stop(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    stops = [value] if isinstance(value, str) else value
    if not isinstance(stops, list) or len(stops) > 4 or not all(isinstance(s, str) and s for s in stops):
        raise invalid_input("`stop` must be a non-empty string or a list of up to 4 non-empty strings.")
    return tuple(stops)
