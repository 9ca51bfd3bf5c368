"""A request's prompt prefix in sections, hashed: what the cache-break detector compares.

A prefix cache reads a prompt in order (the model's own cache, then the tools, the system
prompt and the messages), and one changed byte invalidates everything after it. So each
section is hashed on its own, and the messages one by one: two digests then tell where two
requests first diverge without keeping or reading either body. Hashes are of canonical JSON
(sorted keys), so a re-serialized but equal body digests the same.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

SYSTEM_ROLES = frozenset({"system", "developer"})


@dataclass(frozen=True)
class PrefixDigest:
    tools: tuple[str, ...]
    system: str
    messages: tuple[str, ...]  # after the leading system messages, in order
    user_turns: tuple[int, ...]  # for each message, the user turn it belongs to (1-based; 0: before any)
    # The JSON answer format asked for ("" when none): a template renders it into the prompt.
    answer_format: str = ""
    # Where system (or developer) messages stand among `messages` after the leading ones: a chat
    # template may move them up with the system prompt, so one added mid-conversation changes
    # the prefix even though the earlier messages are unchanged.
    later_system: tuple[int, ...] = ()

    def stored(self) -> dict[str, Any]:
        stored: dict[str, Any] = {
            "tools": list(self.tools),
            "system": self.system,
            "messages": list(self.messages),
            "turns": list(self.user_turns),
        }
        # Only when present: digests stored before these sections compare equal to new ones.
        if self.answer_format:
            stored["format"] = self.answer_format
        if self.later_system:
            stored["later_system"] = list(self.later_system)
        return stored

    @classmethod
    def from_stored(cls, value: Mapping[str, Any]) -> PrefixDigest:
        return cls(
            tools=tuple(value.get("tools", ())),
            system=str(value.get("system", "")),
            messages=tuple(value.get("messages", ())),
            user_turns=tuple(value.get("turns", ())),
            answer_format=str(value.get("format", "")),
            later_system=tuple(value.get("later_system", ())),
        )


def _hash(value: Any) -> str:
    canonical = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.blake2b(canonical.encode(), digest_size=8).hexdigest()


def prefix_digest(body: Mapping[str, Any] | None) -> PrefixDigest | None:
    """The digest of a request body as recorded (OpenAI or Workers AI chat shape), or None when
    it holds no prompt (no body kept, an embedding request, ...)."""
    messages = body_messages(body) if body else None
    if body is None or messages is None:
        return None
    system, rest = split_system(messages)
    turns, turn = [], 0
    for message in rest:
        turn += _role(message) == "user"
        turns.append(turn)
    tools = body.get("tools") or body.get("functions") or []
    answer_format = body.get("response_format")
    return PrefixDigest(
        tools=tuple(_hash(tool) for tool in tools) if isinstance(tools, list) else (_hash(tools),),
        system=_hash(system) if system else "",
        messages=tuple(_hash(message) for message in rest),
        user_turns=tuple(turns),
        answer_format=_hash(answer_format) if answer_format else "",
        later_system=tuple(i for i, message in enumerate(rest) if _role(message) in SYSTEM_ROLES),
    )


def _role(message: Any) -> str:
    return str(message.get("role", "")) if isinstance(message, Mapping) else ""


def body_messages(body: Mapping[str, Any]) -> list[Any] | None:
    """The chat messages of a body: `messages`, or a Workers AI `prompt` as one user message."""
    messages = body.get("messages")
    if isinstance(messages, list):
        return messages
    prompt = body.get("prompt")
    return [{"role": "user", "content": prompt}] if isinstance(prompt, str) else None


def split_system(messages: list[Any]) -> tuple[list[Any], list[Any]]:
    """The leading system (or developer) messages, and the rest."""
    leading = 0
    while leading < len(messages) and _role(messages[leading]) in SYSTEM_ROLES:
        leading += 1
    return messages[:leading], messages[leading:]
