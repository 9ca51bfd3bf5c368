"""What a socket message asks for: the chat socket's commands and the compare socket's.

Parsed here, before any service runs: a message that is too large, not JSON, or names an
unknown action becomes `BadCommand`, whose text the socket shows as a notice.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.conf import settings


class BadCommand(Exception):
    """A WebSocket message we cannot act on; the message is shown to the user."""


@dataclass(frozen=True)
class SendCommand:
    text: str
    attachment_ids: tuple[int, ...] = ()  # uploaded images sent with the text
    after: int | None = None  # the last message on the page (None: the branch's current end)


@dataclass(frozen=True)
class StopCommand:
    pass


@dataclass(frozen=True)
class ContinueCommand:
    """Results for the tool calls of one answer: typed text or a mock's index, by call index."""

    message_id: int
    texts: dict[int, str]
    mocks: dict[int, int]


@dataclass(frozen=True)
class EditCommand:
    """The question `message_id` sent again with new text, as a new branch."""

    message_id: int
    text: str


@dataclass(frozen=True)
class RegenerateCommand:
    """The last answer `message_id` (or an unanswered question) answered again."""

    message_id: int


ChatCommand = SendCommand | StopCommand | ContinueCommand | EditCommand | RegenerateCommand


def chat_command_parse(raw: str | None) -> ChatCommand:
    """One client message: `{"action": "send", "message": "..."}`, `{"action": "stop"}`,
    `{"action": "edit", "message_id": 12, "message": "..."}`, `{"action": "regenerate",
    "message_id": 13}` or a tool continuation (`_continue_command`).

    The htmx ws extension sends the form's fields as JSON (plus a `HEADERS` object we
    ignore); `action` defaults to "send".
    """
    data = _socket_message(raw)
    action = data.get("action", "send")
    if action == "stop":
        return StopCommand()
    if action == "continue":
        return _continue_command(data)
    if action == "regenerate":
        return RegenerateCommand(message_id=_message_id(data))
    if action not in ("send", "edit"):
        raise BadCommand("Unknown action.")
    text = data.get("message", "")
    if not isinstance(text, str):
        raise BadCommand("The message must be text.")
    if action == "edit":
        return EditCommand(message_id=_message_id(data), text=text)
    after = _message_id(data, "after") if data.get("after") not in (None, "") else None
    return SendCommand(text=text, attachment_ids=_attachment_ids(data.get("attachment")), after=after)


def _message_id(data: dict[str, Any], key: str = "message_id") -> int:
    value = data.get(key)
    digits = str(value).strip() if isinstance(value, int | str) and not isinstance(value, bool) else ""
    if not (digits.isascii() and digits.isdigit()):
        raise BadCommand("That action needs the message it applies to.")
    return int(digits)


def _socket_message(raw: str | None) -> dict[str, Any]:
    """A socket message as a JSON object, its size checked before it is parsed."""
    if raw is None:
        raise BadCommand("Messages must be text.")
    size, limit = len(raw.encode("utf-8", "surrogatepass")), settings.CHAT_MAX_FRAME_BYTES
    if size > limit:  # checked before parsing: parsing a huge frame costs memory too
        raise BadCommand(f"That message is {size // 1024:,} KB; the limit is {limit // 1024:,} KB. Not sent.")
    try:
        data = json.loads(raw)
    except ValueError:
        raise BadCommand("That message was not valid JSON; nothing was sent.") from None
    if not isinstance(data, dict):
        raise BadCommand("That message was not a JSON object; nothing was sent.")
    return data


COMPARE_ACTIONS = ("run", "rerun", "send", "stop")


@dataclass(frozen=True)
class CompareCommand:
    action: str  # one of COMPARE_ACTIONS
    text: str = ""  # "send": the next message for every column


def compare_command_parse(raw: str | None) -> CompareCommand:
    """The compare socket's messages, `{"action": "run" | "rerun" | "stop"}` or
    `{"action": "send", "message": "..."}`: "run" starts turn 1 of a comparison never run (the
    page sends it when it opens), "rerun" runs the last turn again, "send" sends the next turn."""
    data = _socket_message(raw)
    action = data.get("action")
    if action not in COMPARE_ACTIONS:
        raise BadCommand("Unknown action.")
    text = data.get("message", "") if action == "send" else ""
    if not isinstance(text, str):
        raise BadCommand("The message must be text.")
    return CompareCommand(action=str(action), text=text)


def _attachment_ids(value: Any) -> tuple[int, ...]:
    """The composer's hidden `attachment` fields: absent, one id, or a list of ids (htmx sends
    a single field as a string, several as a list)."""
    if value is None or value == "":
        return ()
    values = value if isinstance(value, list) else [value]
    limit = settings.ATTACHMENTS_PER_TURN
    if len(values) > limit:
        raise BadCommand(f"A message can carry at most {limit} images; nothing was sent.")
    ids: list[int] = []
    for item in values:
        digits = str(item).strip() if isinstance(item, int | str) and not isinstance(item, bool) else ""
        if not (digits.isascii() and digits.isdigit()):
            raise BadCommand("An attached image id was not a number; nothing was sent.")
        ids.append(int(digits))
    return tuple(dict.fromkeys(ids))


def _continue_command(data: dict[str, Any]) -> ContinueCommand:
    """`{"action": "continue", "message_id": "12", "result_0": "...", "mock_1": "0"}`: the
    tool-call form's fields (`result_<index>`, `mock_<index>`; an empty mock means none)."""
    try:
        message_id = int(data.get("message_id", ""))
    except (TypeError, ValueError):
        raise BadCommand("Continue needs the answer whose tool calls it answers.") from None
    texts: dict[int, str] = {}
    mocks: dict[int, int] = {}
    for key, value in data.items():
        prefix, _, index = key.partition("_")
        if prefix not in ("result", "mock") or not index.isdigit():
            continue
        if not isinstance(value, str):
            raise BadCommand("Tool results must be text.")
        if prefix == "result":
            texts[int(index)] = value
        elif value.strip():
            if not value.strip().isdigit():
                raise BadCommand("Pick a mock from the list.")
            mocks[int(index)] = int(value)
    return ContinueCommand(message_id=message_id, texts=texts, mocks=mocks)
