"""Display strings for chat pages and fragments: pure functions, no ORM, no templates.

Templates only print what these return; every number shown in the chat (tokens, cached
ratio, cost, timings) is formatted here, so the rules ("unknown is not zero", the price
card beside every cost, "estimated" when the provider sent no usage) live in one place.
Callers pass objects whose relations are already loaded (`message_list` selects them).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.urls import reverse
from django.utils.safestring import SafeString
from django.utils.timesince import timesince

from playground.catalog.models import CatalogModel
from playground.chat.models import Attachment, Conversation, Message, MessageRole
from playground.chat.rendering import render_markdown
from playground.chat.tool_presenters import ToolCallView, tool_call_views
from playground.usage.insights.cache_break_selectors import BreakShown
from playground.usage.metering import STOPPED_BY_USER
from playground.usage.models import UsageRecord, UsageSource, UsageStatus
from playground.usage.money import money
from playground.usage.records import RECORD_WRITE_FAILED

NOT_REPORTED = "—"
NOT_KEPT = "Not kept (sent before request bodies were recorded)."
ESTIMATE_RULE = "counted from the text, about 4 characters per token."
SEPARATOR = " · "


@dataclass(frozen=True)
class UsageLine:
    """One answer's usage, ready to print: "1,234 in · 1,000 cached (81%) · 56 out · …"."""

    tokens_in: str
    cached: str
    cached_note: str
    written: str  # "3,100 written to cache"; empty unless the provider reported writes
    tokens_out: str
    cost: str
    price_label: str
    ttft: str
    latency: str
    estimated: bool
    estimated_note: str
    status: str
    status_label: str
    error_text: str
    http_status: int | None = None

    @property
    def is_ok(self) -> bool:
        return self.status == UsageStatus.OK

    @property
    def summary(self) -> str:
        parts = [self.tokens_in, self.cached, *filter(None, [self.written]), self.tokens_out, self.cost]
        parts += [part for part in (self.ttft, self.latency) if part]
        text = SEPARATOR.join(parts)
        return f"{text} (estimated)" if self.estimated else text


@dataclass(frozen=True)
class StructuredView:
    """An answer under a JSON response format: pretty JSON and whether it validated."""

    valid: bool
    errors: list[dict[str, str]]  # {"path", "message"}
    pretty: str  # the answer re-indented, or as sent when it is not JSON


@dataclass(frozen=True)
class RequestView:
    """The "View request" panel: the body as sent (redacted), the reply's HTTP status, the usage received."""

    body: str
    http_status: str
    raw_usage: str
    streamed: bool


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

    @property
    def is_user(self) -> bool:
        return self.role == MessageRole.USER


@dataclass(frozen=True)
class ModelChoice:
    value: str
    label: str


def usage_line(record: UsageRecord) -> UsageLine:
    card = record.price_card
    return UsageLine(
        tokens_in=f"{record.prompt_tokens:,} in",
        cached=cached_text(prompt_tokens=record.prompt_tokens, cached_tokens=record.cached_tokens),
        cached_note=(
            "The provider did not report cached tokens."
            if record.cached_tokens is None
            else "Input tokens served from the provider's prompt cache (billed at the cached rate)."
        ),
        written=f"{record.cache_write_tokens:,} written to cache" if record.cache_write_tokens else "",
        tokens_out=_tokens_out(record.completion_tokens, record.reasoning_tokens),
        cost=money(record.total_cost) if card is not None else "unpriced",
        price_label=record.price_label if card is not None else "No price card for this model and day",
        ttft=f"TTFT {duration_text(record.ttft_ms)}" if record.ttft_ms is not None else "",
        latency=duration_text(record.latency_ms) if record.latency_ms is not None else "",
        estimated=record.usage_source == UsageSource.ESTIMATED,
        estimated_note=_estimated_note(record),
        status=record.status,
        status_label=status_label(record.status, record.error_code),
        error_text=record.error_text,
        http_status=record.http_status,
    )


def _estimated_note(record: UsageRecord) -> str:
    """Why the figures are estimates: the three cases a user must tell apart."""
    if record.error_code == RECORD_WRITE_FAILED:
        return record.error_text
    if record.usage_implausible:
        return f"The provider's usage figures were absurd (not finite or out of range): {ESTIMATE_RULE}"
    return f"The provider sent no usage: {ESTIMATE_RULE}"


def cached_text(*, prompt_tokens: int, cached_tokens: int | None) -> str:
    """ "1,000 cached (81%)"; "— cached" when the provider did not say (unknown is not zero)."""
    if cached_tokens is None:
        return f"{NOT_REPORTED} cached"
    if prompt_tokens <= 0:
        return f"{cached_tokens:,} cached"
    share = round(100 * cached_tokens / prompt_tokens)
    return f"{cached_tokens:,} cached ({share}%)"


def duration_text(ms: int) -> str:
    """ "120 ms" below a second, "1.4 s" above."""
    if ms < 1000:
        return f"{ms} ms"
    return f"{ms / 1000:.1f} s"


def status_label(status: str, error_code: str = "") -> str:
    """What the answer's badge says: a cancelled request reads "Stopped" when the user pressed
    Stop, and names the disconnect when the page went away mid-answer."""
    if status == UsageStatus.CLIENT_DISCONNECTED:
        return "Stopped" if error_code == STOPPED_BY_USER else "Stopped (client disconnected)"
    return UsageStatus(status).label if status in UsageStatus.values else status


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
    alternatives, itself included."""
    record = message.usage_record if message.role == MessageRole.ASSISTANT else None
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


def request_view(record: UsageRecord) -> RequestView:
    return RequestView(
        body=_pretty(record.request_body) if record.request_body is not None else NOT_KEPT,
        http_status=str(record.http_status) if record.http_status is not None else NOT_REPORTED,
        raw_usage=_pretty(record.raw_usage) if record.raw_usage else "The provider sent no usage.",
        streamed=record.streamed,
    )


def _pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)


def answer_models(messages: Sequence[Message], *, current_model: str) -> dict[int, str]:
    """Which answers name their model: none while one model wrote them all and is still the
    conversation's; once it changed, the first answer and every answer whose model differs
    from the answer before it. The model is the one its usage record says served it."""
    served = [
        (message.pk, message.usage_record.model_id)
        for message in messages
        if message.role == MessageRole.ASSISTANT and message.usage_record is not None
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
) -> list[MessageView]:
    """The branch's messages to show; tool results are shown on the answer they reply to.
    `current_model`: the conversation's model now (answers name theirs once it changed);
    `alternatives`: for messages where branches fork, every alternative's id (`branch_shown`);
    `breaks`: the conversation's cache breaks by usage record id."""
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
    return [
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


def model_choices(models: Iterable[CatalogModel], *, today: dt.date) -> list[ModelChoice]:
    """Catalogue models as select options, current ones first, retired ones labelled."""
    ordered = sorted(models, key=lambda model: (model.is_retired_on(today), model.display_name))
    choices = []
    for model in ordered:
        label = model.display_name  # the id is the option's value and shows on the chat page
        if model.deprecated_on is not None:  # `catalog_models_for_kind` loads the alias
            label += f" · {model.retirement_text(today)}"
        choices.append(ModelChoice(value=model.model_id, label=label))
    return choices


@dataclass(frozen=True)
class ConversationRow:
    id: int
    team_id: int
    title: str
    model_id: str
    team_name: str
    updated_at: dt.datetime
    updated: str  # "just now", "3 hours ago"


def conversation_rows(conversations: Iterable[Conversation], *, now: dt.datetime) -> list[ConversationRow]:
    """List entries; `conversations` must come with their team (`conversation_list` selects it)."""
    return [
        ConversationRow(
            id=conversation.pk,
            team_id=conversation.team_id,
            title=conversation.title or "Untitled conversation",
            model_id=conversation.model_id,
            team_name=conversation.team.name,
            updated_at=conversation.updated_at,
            updated=ago_text(conversation.updated_at, now=now),
        )
        for conversation in conversations
    ]


def ago_text(when: dt.datetime, *, now: dt.datetime) -> str:
    if (now - when).total_seconds() < 60:
        return "just now"
    return f"{timesince(when, now, depth=1)} ago"


def _tokens_out(completion: int, reasoning: int | None) -> str:
    text = f"{completion:,} out"
    if reasoning:
        text += f" ({reasoning:,} reasoning)"
    return text


def composer_note(conversation: Conversation, *, can_run: bool) -> str:
    """Why the composer is closed on this conversation; empty when the user can send."""
    if not can_run:
        return (
            f"You are a viewer in {conversation.team.name}: you can read this conversation but not send "
            "messages (sending costs money). Ask a team owner for the member role."
        )
    if conversation.connection_id is None:
        return "This conversation's connection was deleted; start a new conversation to continue."
    return ""


FORMAT_LABELS = {"json_object": "JSON object", "json_schema": "JSON schema"}


def composer_summary(conversation: Conversation) -> str:
    """The settings panel's one-line summary: "temperature 0.2 · max tokens 512 · JSON schema person"."""
    parts = []
    for name, value in (conversation.parameters or {}).items():
        label = name.replace("_", " ")
        if name == "stop":
            parts.append(f"{len(value)} stop sequence{'s' if len(value) != 1 else ''}")
        elif name == "thinking":
            parts.append(f"thinking {'on' if value else 'off'}")
        else:
            parts.append(f"{label} {value}")
    response_format = conversation.response_format or {}
    kind = response_format.get("type", "text")
    if kind in FORMAT_LABELS:
        name = (response_format.get("json_schema") or {}).get("name", "")
        parts.append(f"{FORMAT_LABELS[kind]} {name}".strip())
    return SEPARATOR.join(parts) or "Model defaults · text"
