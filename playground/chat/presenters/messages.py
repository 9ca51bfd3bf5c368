"""Messages as the chat page and its socket frames show them: pure functions, no ORM, no templates.

Templates only print what these return: a message's text or rendered answer, its images, tool
calls, branch arrows, structured output and usage line (`presenters.usage`). Callers pass
objects whose relations are already loaded (`message_list` selects them).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from django.urls import reverse
from django.utils.safestring import SafeString

from playground.chat.models import Attachment, Message, MessageRole, SystemPromptChange
from playground.chat.presenters.rendering import render_markdown
from playground.chat.presenters.tools import ToolCallView, tool_call_views
from playground.chat.presenters.usage import UsageLine, usage_line
from playground.usage.insights.cache_break_selectors import BreakShown


@dataclass(frozen=True)
class StructuredView:
    """An answer under a JSON response format: pretty JSON and whether it validated."""

    valid: bool
    errors: list[dict[str, str]]  # {"path", "message"}
    pretty: str  # the answer re-indented, or as sent when it is not JSON


@dataclass(frozen=True)
class ImageView:
    """An attachment as a thumbnail: served by the attachment view, never a public URL."""

    id: int
    url: str
    alt: str
    width: int
    height: int
    label: str  # "PNG · 800 x 600 · 120 KB"


def image_view(attachment: Attachment, *, number: int = 1) -> ImageView:
    kind = attachment.content_type.removeprefix("image/").upper()
    label = f"{kind} · {attachment.width:,} x {attachment.height:,} · {size_text(attachment.size_bytes)}"
    return ImageView(
        id=attachment.pk,
        url=reverse("chat:attachment", args=[attachment.pk]),
        alt=f"Image {number} ({label})",
        width=attachment.width,
        height=attachment.height,
        label=label,
    )


def size_text(size: int) -> str:
    if size < 1024:
        return f"{size} B"
    if size < 1024 * 1024:
        return f"{size / 1024:.0f} KB"
    return f"{size / (1024 * 1024):.1f} MB"


@dataclass(frozen=True)
class BranchView:
    """Where a message stands among its alternatives (edits of a question, regenerated
    answers): "< 2 / 3 >", each arrow the id of the alternative it shows."""

    position: int
    count: int
    previous_id: int | None
    next_id: int | None


def branch_view(message_id: int, alternatives: Sequence[int]) -> BranchView | None:
    """None when the message has no alternative (nothing to switch to)."""
    if len(alternatives) < 2 or message_id not in alternatives:
        return None
    index = alternatives.index(message_id)
    return BranchView(
        position=index + 1,
        count=len(alternatives),
        previous_id=alternatives[index - 1] if index > 0 else None,
        next_id=alternatives[index + 1] if index + 1 < len(alternatives) else None,
    )


@dataclass(frozen=True)
class SystemChangeView:
    """Where the history says the system prompt changed, and from what to what."""

    before: str
    after: str
    at: dt.datetime
    by: str  # the user's name ("" when since deleted)


@dataclass(frozen=True)
class MessageView:
    id: int
    role: str
    dom_id: str
    text: str  # the raw text; templates escape it (user messages are shown as typed)
    html: SafeString  # assistant answers: rendered, sanitized markdown
    reasoning: str
    usage: UsageLine | None
    structured: StructuredView | None = None
    has_request: bool = False  # it has a usage record ("View request")
    conversation_id: int = 0
    images: tuple[ImageView, ...] = ()  # user messages: the images sent with the text
    tool_calls: tuple[ToolCallView, ...] = ()
    awaiting_results: bool = False  # the latest answer, its calls not answered yet: show the form
    failed: bool = False  # a refused or failed answer: its turn is not sent again and may be deleted
    model_label: str = ""  # the model that wrote this answer, shown once a conversation's model changed
    branch: BranchView | None = None  # its alternatives, when it has some
    cache_break: BreakShown | None = None  # its request lost the prefix the one before it cached
    system_changes: tuple[SystemChangeView, ...] = ()  # made between the message before and this one
    written: bool = False  # written by the user (an example answer, an inserted message), not sent
    copied: bool = False  # a fork's copy: its usage line is the original's, counted there

    @property
    def is_user(self) -> bool:
        return self.role == MessageRole.USER


def message_view(
    message: Message,
    *,
    tools: Sequence[Mapping[str, Any]] = (),
    results: Iterable[Message] = (),
    awaiting: bool = False,
    model_label: str = "",
    alternatives: Sequence[int] = (),
    cache_break: BreakShown | None = None,
) -> MessageView:
    """`tools`: the conversation's definitions (for mocks); `results`: this answer's tool
    messages; `awaiting`: it is the latest answer and its calls may still be answered;
    `model_label`: the model to name on it (see `answer_models`); `alternatives`: its branch
    alternatives, itself included. A fork's copy shows the original answer's record."""
    record = message.shown_record if message.role == MessageRole.ASSISTANT else None
    return MessageView(
        id=message.pk,
        role=message.role,
        dom_id=f"message-{message.pk}",
        text=message.content,
        html=render_markdown(message.content) if message.role == MessageRole.ASSISTANT else SafeString(""),
        reasoning=message.reasoning,
        usage=usage_line(record) if record is not None else None,
        structured=structured_view(message.content, message.structured) if message.structured else None,
        has_request=record is not None,
        conversation_id=message.conversation_id,
        tool_calls=tuple(tool_call_views(message, tools=tools, results=results)),
        awaiting_results=awaiting and bool(message.tool_calls) and not results,
        images=_images(message),
        failed=message.is_failed_answer,
        model_label=model_label,
        branch=branch_view(message.pk, alternatives),
        cache_break=cache_break,
        written=message.written,
        copied=record is not None and message.usage_record is None,
    )


def _images(message: Message) -> tuple[ImageView, ...]:
    """A user message's images, when the caller prefetched them (`message_list` and
    `chat_turn_start` do): this runs in async code too, where a query is not allowed."""
    prefetched = getattr(message, "_prefetched_objects_cache", {})
    if message.role != MessageRole.USER or "attachments" not in prefetched:
        return ()
    attachments = prefetched["attachments"]
    return tuple(image_view(attachment, number=n) for n, attachment in enumerate(attachments, 1))


def structured_view(text: str, structured: dict[str, Any]) -> StructuredView:
    try:
        pretty = json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except ValueError:
        pretty = text
    errors = [error for error in structured.get("errors", []) if isinstance(error, dict)]
    return StructuredView(valid=bool(structured.get("valid")), errors=errors, pretty=pretty)


def answer_models(messages: Sequence[Message], *, current_model: str) -> dict[int, str]:
    """Which answers name their model: none while one model wrote them all and is still the
    conversation's; once it changed, the first answer and every answer whose model differs
    from the answer before it. The model is the one its usage record says served it (a fork's
    copy: the original's)."""
    served = [
        (message.pk, record.model_id)
        for message in messages
        if message.role == MessageRole.ASSISTANT and (record := message.shown_record) is not None
    ]
    if len({model for _, model in served} | {current_model}) <= 1:
        return {}
    labels = {}
    previous = ""
    for pk, model in served:
        if model != previous:
            labels[pk] = model
        previous = model
    return labels


def message_views(
    messages: Iterable[Message],
    *,
    tools: Sequence[Mapping[str, Any]] = (),
    current_model: str = "",
    alternatives: Mapping[int, Sequence[int]] | None = None,
    breaks: Mapping[int, BreakShown] | None = None,
    system_changes: Sequence[SystemPromptChange] = (),
) -> list[MessageView]:
    """The branch's messages to show; tool results are shown on the answer they reply to.
    `current_model`: the conversation's model now (answers name theirs once it changed);
    `alternatives`: for messages where branches fork, every alternative's id (`branch_shown`);
    `breaks`: the conversation's cache breaks by usage record id; `system_changes`: the
    conversation's system prompt changes, each shown before the first message made after it
    (`system_changes_after` lists those made after the last)."""
    shown: list[Message] = []
    results: dict[int, list[Message]] = {}
    for message in messages:
        if message.role == MessageRole.TOOL and message.reply_to_id is not None:
            results.setdefault(message.reply_to_id, []).append(message)
        elif message.role != MessageRole.TOOL:
            shown.append(message)
    last = shown[-1].pk if shown else None
    models = answer_models(shown, current_model=current_model) if current_model else {}
    forks = alternatives or {}
    views = [
        message_view(
            message,
            tools=tools,
            results=results.get(message.pk, ()),
            awaiting=message.pk == last,
            model_label=models.get(message.pk, ""),
            alternatives=forks.get(message.pk, ()),
            cache_break=(breaks or {}).get(message.usage_record_id) if message.usage_record_id else None,
        )
        for message in shown
    ]
    if not system_changes:
        return views
    made_before = [message.created_at for message in shown]
    return [
        replace(
            view,
            system_changes=tuple(
                system_change_view(change)
                for change in system_changes
                if (index == 0 or change.created_at > made_before[index - 1]) and change.created_at <= at
            ),
        )
        for index, (view, at) in enumerate(zip(views, made_before, strict=True))
    ]


def system_changes_after(
    messages: Sequence[Message], system_changes: Sequence[SystemPromptChange]
) -> list[SystemChangeView]:
    """The changes made after the branch's last message: what its next turn will send."""
    last = messages[-1].created_at if messages else None
    return [system_change_view(c) for c in system_changes if last is None or c.created_at > last]


def system_change_view(change: SystemPromptChange) -> SystemChangeView:
    return SystemChangeView(
        before=change.before,
        after=change.after,
        at=change.created_at,
        by=change.user.get_username() if change.user is not None else "",
    )
