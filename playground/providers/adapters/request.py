"""The request every chat adapter sends, and how many prompt characters it puts before the model."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from playground.providers.images import content_prompt_chars


@dataclass(frozen=True)
class ChatRequest:
    model: str
    messages: list[dict[str, Any]]  # OpenAI chat-completions message dicts
    max_tokens: int | None = None
    temperature: float | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    response_format: dict[str, Any] | None = None
    # Other body fields (top_p, seed, stop, penalties, reasoning controls), already limited to
    # what the connection's kind accepts (`KindSpec.parameters`).
    parameters: dict[str, Any] = field(default_factory=dict)
    affinity_key: str = ""  # sent as x-session-affinity when non-empty
    stream: bool = True
    # The prompt variables' values filled into `messages` ({name: value}), never sent: the usage
    # record keeps them (`presets.variables`). None: the request used none.
    variables: Mapping[str, str] | None = None

    @property
    def prompt_chars(self) -> int:
        """Characters of everything the model reads: what a token estimate of the prompt counts
        (the context-window check, the budget reservation, and usage when a provider reports none).

        Message content: parts count their text; each image counts as a fixed
        `IMAGE_PROMPT_CHARS` (never its base64, which would make one photo look like a million
        tokens). Assistant `tool_calls` count their names and arguments, and the tool
        definitions and the response format (its schema) count as the JSON sent: models read
        them too, in their template.
        """
        chars = sum(_message_prompt_chars(message) for message in self.messages)
        for sent in (self.tools, self.response_format):
            if sent:
                chars += len(json.dumps(sent, ensure_ascii=False))
        return chars


def _message_prompt_chars(message: Mapping[str, Any]) -> int:
    chars = content_prompt_chars(message.get("content"))
    for call in message.get("tool_calls") or ():
        function = call.get("function") if isinstance(call, Mapping) else None
        if isinstance(function, Mapping):
            arguments = function.get("arguments") or ""
            if not isinstance(arguments, str):  # some wires send the arguments as an object
                arguments = json.dumps(arguments, ensure_ascii=False)
            chars += len(str(function.get("name") or "")) + len(arguments)
    return chars
