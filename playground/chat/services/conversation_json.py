"""A conversation exported as JSON, and a JSON document imported as a new conversation.

The document is `chat.domain.conversation_json`'s: the request the conversation's next turn
would send (the branch on screen, failed turns left out, as the history sends it) plus the
playground's own settings. An import checks the document, then where it goes (the team's
connection, the model, what that model takes), then writes the conversation with the
document's messages as one branch: answers are marked written (they were not generated here
and have no usage record), tool calls keep their results, and each image goes through the
upload pipeline's checks (decoded by its content, re-encoded without metadata, size-checked).
Nothing is written unless all of it can be.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from playground.catalog.selectors import catalog_models_for_kind
from playground.chat.domain.attachments import (
    CleanImage,
    ImageRefused,
    attachment_store,
    attachments_link,
    image_clean,
    image_refusal,
    too_large_message,
)
from playground.chat.domain.composer import composer_capabilities, parameters_check, parameters_wire
from playground.chat.domain.conversation_json import (
    ConversationJsonInvalid,
    ImportedConversation,
    document_build,
    document_read,
)
from playground.chat.domain.tools import MAX_RESULT_CHARS, tool_call_record
from playground.chat.models import Attachment, Conversation, Message, MessageRole
from playground.chat.selectors import conversation_get
from playground.chat.services.conversations import ConversationNotFound
from playground.chat.services.history import upstream_messages
from playground.chat.services.turns import MAX_MESSAGE_CHARS, TITLE_CHARS
from playground.providers.connection_check import connection_model_check
from playground.providers.json_problems import Issue
from playground.providers.models import ProviderConnection
from playground.providers.request_rules import JSON_SCHEMA, request_capabilities
from playground.providers.selectors import connection_for_run, connection_list_runnable
from playground.providers.structured_answers import structured_check

UNTITLED = "Imported conversation"


def conversation_export(*, user: User, conversation_id: int) -> dict[str, Any]:
    """The conversation as a document: anyone who may read it may export it (viewers too).
    Raises `ConversationNotFound` for another team's conversation."""
    conversation = conversation_get(user=user, conversation_id=conversation_id)
    if conversation is None:
        raise ConversationNotFound(conversation_id)
    now = timezone.now()
    caps = composer_capabilities(conversation=conversation, day=now.date())
    return document_build(
        conversation=conversation,
        messages=upstream_messages(conversation, limit=None),
        parameters=parameters_wire(conversation.parameters or {}, caps=caps),
        exported_at=now,
    )


@dataclass(frozen=True)
class ImportTarget:
    """Where an import goes: one of the user's teams; its connection (None: the one the document
    names, by name and kind, else by kind, else the team's default); the model (empty: the
    document's)."""

    team_id: int
    connection_id: int | None = None
    model_id: str = ""


class ImportTargetRefused(ValidationError):
    """The target cannot take the document: keyed by the form's field (team, connection,
    model_id). `connection`: the connection it tried, whose models the form then offers."""

    def __init__(self, error: Any, *, connection: ProviderConnection | None = None) -> None:
        super().__init__(error)
        self.connection = connection


def conversation_import(*, user: User, text: str, target: ImportTarget) -> Conversation:
    """A new conversation of the user's holding the document `text`, on `target`.

    Raises `ConversationJsonInvalid` (every problem of the document at its JSON path, and
    what the target's model does not take: a parameter, a JSON schema, tools, images) or
    `ImportTargetRefused`; nothing is written then.
    """
    imported = document_read(text)
    connection = _connection(user=user, target=target, named=imported.connection)
    connection, model_id = _model(
        user=user, connection=connection, chosen=target.model_id.strip(), named=imported.model_id
    )
    problems: list[Issue] = []
    parameters = _parameters_fit(imported, connection=connection, model_id=model_id, problems=problems)
    problems += _texts_problems(imported)
    images = _images_clean(imported, model_id=model_id, problems=problems)
    if problems:
        raise ConversationJsonInvalid(problems)
    return _conversation_write(
        user=user,
        imported=imported,
        connection=connection,
        model_id=model_id,
        parameters=parameters,
        images=images,
    )


def _connection(*, user: User, target: ImportTarget, named: Mapping[str, str] | None) -> ProviderConnection:
    connections = [c for c in connection_list_runnable(user=user) if c.team_id == target.team_id]
    if not connections:
        raise ImportTargetRefused(
            {"team": "Choose one of your teams where you may run requests and that has a connection."}
        )
    if target.connection_id is not None:
        chosen = next((c for c in connections if c.pk == target.connection_id), None)
        if chosen is None:
            raise ImportTargetRefused({"connection": "Choose one of this team's connections."})
        return chosen
    return connection_matching(connections, named)


def connection_matching(
    connections: Sequence[ProviderConnection], named: Mapping[str, str] | None
) -> ProviderConnection:
    """The connection a document goes to unless one is chosen: the one with its connection's name
    and kind, else its name, else its kind, else the team's default (`connections`: one team's,
    the default first)."""
    name, kind = (named or {}).get("name"), (named or {}).get("kind")
    tests: tuple[Callable[[ProviderConnection], bool], ...] = (
        lambda c: c.name == name and c.kind == kind,
        lambda c: c.name == name,
        lambda c: c.kind == kind,
        lambda c: c.is_default,
    )
    for test in tests:
        found = next((c for c in connections if test(c)), None)
        if found is not None:
            return found
    return connections[0]


def _model(
    *, user: User, connection: ProviderConnection, chosen: str, named: str
) -> tuple[ProviderConnection, str]:
    """The connection and the model id the conversation will send to: the one chosen, else the
    document's, if the connection serves it."""
    model_id = chosen or named
    where = "" if chosen else "$.model: "  # a refused model from the document is named by its path
    if not model_id:
        raise ImportTargetRefused(
            {"model_id": "The document names no model: choose one."}, connection=connection
        )
    try:
        connection, model_id = connection_for_run(user=user, connection_id=connection.pk, model_id=model_id)
        connection_model_check(connection=connection, model_id=model_id)
    except ValidationError as exc:
        raise ImportTargetRefused(
            {"model_id": [f"{where}{message}" for message in exc.messages]}, connection=connection
        ) from None
    catalogued = catalog_models_for_kind(kind=connection.kind).filter(model_id=model_id).exists()
    if not connection.spec.free_model_id and not catalogued:
        raise ImportTargetRefused(
            {
                "model_id": f"{where}{connection.name} serves the catalogue's {connection.spec.label} "
                f"models, and {model_id} is not one of them: choose one."
            },
            connection=connection,
        )
    return connection, model_id


def _parameters_fit(
    imported: ImportedConversation, *, connection: ProviderConnection, model_id: str, problems: list[Issue]
) -> dict[str, Any]:
    """The parameters to store, and (on `problems`) what the model does not take: a parameter, a
    JSON schema, tools; each at its path in the document."""
    caps = request_capabilities(connection=connection, model_id=model_id, day=timezone.now().date())
    parameters: dict[str, Any] = {}
    try:
        parameters = parameters_check(caps=caps, parameters=imported.parameters)
    except ValidationError as exc:
        for name, messages in exc.message_dict.items():
            problems += [Issue(imported.parameter_paths.get(name, "$"), message) for message in messages]
    response_format = imported.response_format or {}
    if response_format.get("type") == JSON_SCHEMA and not caps.json_schema:
        problems.append(Issue("$.response_format", caps.json_schema_reason))
    if imported.tools and not caps.tools.allowed:
        problems.append(Issue("$.tools", caps.tools.reason))
    return parameters


def _texts_problems(imported: ImportedConversation) -> list[Issue]:
    """Texts longer than a message (or a tool result) may be."""
    problems = []
    for message in imported.messages:
        limit = MAX_RESULT_CHARS if message.role == MessageRole.TOOL else MAX_MESSAGE_CHARS
        if len(message.text) > limit:
            problems.append(
                Issue(f"{message.path}.content", f"{len(message.text):,} characters; at most {limit:,}.")
            )
    return problems


def _images_clean(
    imported: ImportedConversation, *, model_id: str, problems: list[Issue]
) -> dict[str, CleanImage]:
    """Each image judged and re-encoded as an upload is, by its path; refusals on `problems`."""
    carrying = [message for message in imported.messages if message.images]
    if not carrying:
        return {}
    refusal = image_refusal(model_id=model_id)
    if refusal:
        problems.append(Issue(carrying[0].images[0].path, refusal))
        return {}
    limit = settings.ATTACHMENT_MAX_BYTES
    cleaned: dict[str, CleanImage] = {}
    most = settings.ATTACHMENTS_PER_TURN
    for message in carrying:
        if len(message.images) > most:
            problems.append(
                Issue(
                    f"{message.path}.content",
                    f"{len(message.images)} images; a message carries at most {most}.",
                )
            )
            continue
        for image in message.images:
            if len(image.data) > limit:
                problems.append(Issue(image.path, too_large_message(limit)))
                continue
            try:
                cleaned[image.path] = image_clean(image.data)
            except ImageRefused as exc:
                problems.append(Issue(image.path, " ".join(exc.messages)))
    return cleaned


def _conversation_write(
    *,
    user: User,
    imported: ImportedConversation,
    connection: ProviderConnection,
    model_id: str,
    parameters: dict[str, Any],
    images: Mapping[str, CleanImage],
) -> Conversation:
    """The conversation and its messages as one branch, in one transaction; the images' files
    are removed again if it does not commit."""
    stored: list[Attachment] = []
    try:
        with transaction.atomic():
            conversation = Conversation.objects.create(
                team_id=connection.team_id,
                user=user,
                connection=connection,
                model_id=model_id,
                title=imported.title or _title(imported),
                system_prompt=imported.system_prompt,
                use_affinity=imported.use_affinity,
                affinity_key=f"pg-{uuid.uuid4().hex}",
                parameters=parameters,
                tools=imported.tools,
                tool_choice=imported.tool_choice,
                parallel_tool_calls=imported.parallel_tool_calls,
                auto_mock_steps=imported.auto_mock_steps,
                response_format=imported.response_format,
                variables=imported.variables,
            )
            saved: list[Message] = []
            for message in imported.messages:
                saved.append(
                    Message.objects.create(
                        conversation=conversation,
                        parent=saved[-1] if saved else None,
                        role=message.role,
                        content=message.text,
                        reasoning=message.reasoning,
                        tool_calls=[tool_call_record(call, imported.tools) for call in message.tool_calls],
                        reply_to=saved[message.answers] if message.answers is not None else None,
                        tool_call_index=message.call_index,
                        tool_call_id=message.tool_call_id,
                        structured=structured_check(
                            text=message.text, response_format=imported.response_format
                        )
                        if message.role == MessageRole.ASSISTANT
                        else None,
                        written=message.written,
                    )
                )
                attachments = [
                    attachment_store(conversation=conversation, image=images[i.path]) for i in message.images
                ]
                stored += attachments
                attachments_link(message=saved[-1], attachments=attachments)
            conversation.current_leaf = saved[-1] if saved else None
            conversation.save(update_fields=["current_leaf"])
    except BaseException:
        for attachment in stored:
            attachment.file.delete(save=False)
        raise
    return conversation


def _title(imported: ImportedConversation) -> str:
    """The first question's start, as a conversation's first turn names it."""
    first = next((m.text for m in imported.messages if m.role == MessageRole.USER and m.text.strip()), "")
    return " ".join(first.split())[:TITLE_CHARS] or UNTITLED
