"""Display data for tools: the editor panel and the tool-call cards. Pure functions, no ORM."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from playground.chat.domain.tools import (
    MAX_AUTO_MOCK_STEPS,
    mock_text,
    tool_by_name,
    tool_choice_name,
    tools_token_estimate,
)
from playground.chat.models import Message
from playground.providers.json_problems import Issue
from playground.providers.request_rules import ToolSupport

MOCK_LABEL_CHARS = 60
TOOLS_PLACEHOLDER = """[
  {
    "type": "function",
    "function": {
      "name": "get_weather",
      "description": "The current weather in a city.",
      "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"]
      }
    },
    "returns_json": true,
    "mocks": [{"city": "Paris", "temperature_c": 18}]
  }
]"""


@dataclass(frozen=True)
class MockChoice:
    index: int
    label: str


@dataclass(frozen=True)
class ToolCallView:
    index: int
    number: int  # 1-based, for people
    call_id: str  # as the model sent it (may repeat: Kimi)
    name: str
    arguments: str  # pretty JSON, or the text as sent when it is not JSON
    valid: bool
    errors: list[dict[str, str]]  # {"path", "message"}
    result: str | None  # the tool message's content once answered
    returns_json: bool
    mocks: list[MockChoice]
    dom_id: str


def tool_call_views(
    message: Message, *, tools: Sequence[Mapping[str, Any]], results: Iterable[Message] = ()
) -> list[ToolCallView]:
    answered = {result.tool_call_index: result.content for result in results}
    views = []
    for call in sorted(message.tool_calls or [], key=lambda call: call["index"]):
        tool = tool_by_name(tools, call["name"]) or {}
        mocks = tool.get("mocks") or []
        views.append(
            ToolCallView(
                index=call["index"],
                number=call["index"] + 1,
                call_id=call.get("id", ""),
                name=call["name"],
                arguments=_pretty(call.get("arguments", "")),
                valid=bool(call.get("valid")),
                errors=[error for error in call.get("errors", []) if isinstance(error, dict)],
                result=answered.get(call["index"]),
                returns_json=bool(tool.get("returns_json")),
                mocks=[MockChoice(i, _mock_label(i, mock)) for i, mock in enumerate(mocks)],
                dom_id=f"toolcall-{message.pk}-{call['index']}",
            )
        )
    return views


@dataclass(frozen=True)
class ToolsPanel:
    text: str  # the editor's content: what was typed (after a refused save) or what is stored
    tool_choice: str
    choice_options: list[tuple[str, str]]
    parallel_tool_calls: bool
    auto_mock_steps: int
    max_auto_mock_steps: int
    count: int
    token_estimate: int
    support: ToolSupport
    problems: list[Issue]
    saved: bool
    placeholder: str = TOOLS_PLACEHOLDER

    @property
    def enabled(self) -> bool:
        return self.support.allowed


def tools_panel(
    *,
    tools: Sequence[Mapping[str, Any]],
    tool_choice: Any,
    parallel_tool_calls: bool,
    auto_mock_steps: int,
    support: ToolSupport,
    text: str | None = None,
    problems: Sequence[Issue] = (),
    saved: bool = False,
) -> ToolsPanel:
    names = [str(tool.get("function", {}).get("name", "")) for tool in tools]
    options = [
        ("auto", "auto: the model decides"),
        ("none", "none: never call"),
        ("required", "required: call one"),
    ]
    options += [(name, f"always {name}") for name in names if name]
    return ToolsPanel(
        text=text
        if text is not None
        else (json.dumps(list(tools), indent=2, ensure_ascii=False) if tools else ""),
        tool_choice=tool_choice_name(tool_choice),
        choice_options=options,
        parallel_tool_calls=parallel_tool_calls,
        auto_mock_steps=auto_mock_steps,
        max_auto_mock_steps=MAX_AUTO_MOCK_STEPS,
        count=len(tools),
        token_estimate=tools_token_estimate(tools),
        support=support,
        problems=list(problems),
        saved=saved,
    )


def _pretty(arguments: str) -> str:
    try:
        return json.dumps(json.loads(arguments), indent=2, ensure_ascii=False)
    except ValueError:
        return arguments


def _mock_label(index: int, mock: Any) -> str:
    text = mock_text(mock)
    if len(text) > MOCK_LABEL_CHARS:
        text = text[: MOCK_LABEL_CHARS - 1] + "…"
    return f"Mock {index + 1}: {text}"
