"""Conversations: start one on a connection and model, save its settings (affinity, composer,
tools), rename it, change the connection or model its next turn goes to, and delete it."""

from __future__ import annotations

import uuid
from typing import Any

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from playground.accounts.permissions import require_run_role
from playground.chat.domain.composer import composer_capabilities, parameters_check, response_format_check
from playground.chat.domain.tools import MAX_AUTO_MOCK_STEPS, ToolsInvalid, tool_choice_parse, tools_parse
from playground.chat.models import Attachment, Conversation, SystemPromptChange
from playground.chat.selectors import conversation_get
from playground.lib.storable import is_storable
from playground.presets.variables import (
    Variable,
    values_problems,
    variables_declared,
    variables_problems,
    variables_read,
)
from playground.providers.connection_check import connection_model_check
from playground.providers.json_problems import Issue
from playground.providers.request_rules import JSON_SCHEMA, Capabilities, request_capabilities, tools_support
from playground.providers.selectors import connection_for_run

# The settings a preset version holds besides the system prompt (which does not change after a
# conversation starts): changing one detaches the conversation from its version.
SETUP_FIELDS = (
    "connection_id",
    "model_id",
    "system_prompt",
    "parameters",
    "response_format",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "auto_mock_steps",
    "use_affinity",
)


def _setup_save(conversation: Conversation, before: list[Any], fields: list[str]) -> None:
    """Save `fields`; if the setup changed from `before`, the turns to come no longer run the
    preset version the conversation named, so it names none."""
    if conversation.preset_version_id is not None and _setup_now(conversation) != before:
        conversation.preset_version = None
        fields = [*fields, "preset_version"]
    conversation.save(update_fields=[*fields, "updated_at"])


def _setup_now(conversation: Conversation) -> list[Any]:
    """The setup a preset version fixes: the variables' names and types, not their values (a new
    value is what a variable is for: the version still names what sent the turn)."""
    declared = [(variable.name, variable.type) for variable in variables_read(conversation.variables)]
    return [*(getattr(conversation, field) for field in SETUP_FIELDS), declared]


class ConversationNotFound(Exception):
    """No conversation with that id in the user's teams (answered as 404)."""


class MessageNotFound(ConversationNotFound):
    """No such message in that conversation of the user's teams (answered as 404)."""


def conversation_for_run(*, user: User, conversation_id: int) -> Conversation:
    """The user's conversation, if they may send in it. Raises `ConversationNotFound`
    (another team's, or none) or `PermissionDenied` (viewers)."""
    conversation = conversation_get(user=user, conversation_id=conversation_id)
    if conversation is None:
        raise ConversationNotFound(conversation_id)
    require_run_role(user=user, team_id=conversation.team_id)
    return conversation


def conversation_create(
    *,
    user: User,
    connection_id: int,
    model_id: str,
    system_prompt: str = "",
    use_affinity: bool = True,
) -> Conversation:
    """Raises `ValidationError` keyed by form field: see `connection_for_run`, and a model id the
    connection does not serve when it lists its models (`connection_model_check`)."""
    connection, model_id = connection_for_run(user=user, connection_id=connection_id, model_id=model_id)
    connection_model_check(connection=connection, model_id=model_id)
    return Conversation.objects.create(
        team_id=connection.team_id,
        user=user,
        connection=connection,
        model_id=model_id,
        system_prompt=system_prompt,
        use_affinity=use_affinity,
        affinity_key=f"pg-{uuid.uuid4().hex}",
    )


def conversation_settings_update(*, user: User, conversation_id: int, use_affinity: bool) -> Conversation:
    conversation = conversation_for_run(user=user, conversation_id=conversation_id)
    before = _setup_now(conversation)
    conversation.use_affinity = use_affinity
    _setup_save(conversation, before, ["use_affinity"])
    return conversation


def conversation_composer_update(
    *,
    user: User,
    conversation_id: int,
    parameters: dict[str, Any],
    response_format: str,
    schema_name: str = "",
    schema_strict: bool = False,
    schema_text: str = "",
    system_prompt: str | None = None,
) -> Conversation:
    """Save the composer's settings, all or nothing; `system_prompt` None leaves it as it is.

    A changed system prompt is a new version of the conversation's setup, kept as a
    `SystemPromptChange`: the next turn sends it and the history shows where it changed.
    Raises `ValidationError` keyed by field: a parameter the model or connection does not
    take, `json_schema` for a model the catalogue does not say can follow one, a schema
    that is not JSON or breaks the 2020-12 meta-schema (each error with its JSON path).
    """
    conversation = conversation_for_run(user=user, conversation_id=conversation_id)
    caps = composer_capabilities(conversation=conversation, day=timezone.now().date())
    errors: dict[str, list[str]] = {}
    kept: dict[str, Any] = {}
    stored_format = None
    try:
        kept = parameters_check(caps=caps, parameters=parameters)
    except ValidationError as exc:
        errors.update(exc.message_dict)
    try:
        stored_format = response_format_check(
            caps=caps, kind=response_format, name=schema_name, strict=schema_strict, schema_text=schema_text
        )
    except ValidationError as exc:
        errors.update(exc.message_dict)
    if errors:
        raise ValidationError(errors)
    before = _setup_now(conversation)
    conversation.parameters = kept
    conversation.response_format = stored_format
    fields = ["parameters", "response_format"]
    with transaction.atomic():
        if system_prompt is not None and system_prompt != conversation.system_prompt:
            SystemPromptChange.objects.create(
                conversation=conversation, user=user, before=conversation.system_prompt, after=system_prompt
            )
            conversation.system_prompt = system_prompt
            conversation.variables = [  # a placeholder new to the prompt declares its variable
                variable.as_json()
                for variable in variables_declared(variables_read(conversation.variables), [system_prompt])
            ]
            fields += ["system_prompt", "variables"]
        _setup_save(conversation, before, fields)
    return conversation


def conversation_capabilities(*, conversation: Conversation) -> Capabilities:
    return composer_capabilities(conversation=conversation, day=timezone.now().date())


def conversation_tools_update(
    *,
    user: User,
    conversation_id: int,
    tools_text: str,
    tool_choice: str,
    parallel_tool_calls: bool,
    auto_mock_steps: int,
) -> Conversation:
    """Save the tools editor, all or nothing: raises `ToolsInvalid` listing every problem
    with its JSON path (see `chat.domain.tools`), and refuses tools for a model that takes none."""
    conversation = conversation_for_run(user=user, conversation_id=conversation_id)
    problems: list[Issue] = []
    tools: list[dict[str, Any]] = []
    choice: str | dict[str, Any] = "auto"
    try:
        tools = tools_parse(tools_text)
        choice = tool_choice_parse(tool_choice, tools)
    except ToolsInvalid as exc:
        problems += exc.problems
    if not 0 <= auto_mock_steps <= MAX_AUTO_MOCK_STEPS:
        problems.append(Issue("auto_mock_steps", f"Between 0 and {MAX_AUTO_MOCK_STEPS}."))
    support = tools_support(model_id=conversation.model_id)
    if tools and not support.allowed:
        problems.insert(0, Issue("$", support.reason))
    if problems:
        raise ToolsInvalid(problems)
    before = _setup_now(conversation)
    conversation.tools = tools
    conversation.tool_choice = choice
    conversation.parallel_tool_calls = parallel_tool_calls
    conversation.auto_mock_steps = auto_mock_steps
    _setup_save(conversation, before, ["tools", "tool_choice", "parallel_tool_calls", "auto_mock_steps"])
    return conversation


def conversation_variables_update(
    *, user: User, conversation_id: int, rows: list[dict[str, str]], declare: str = ""
) -> Conversation:
    """Save the Variables panel, all or nothing: each row {"name", "type", "value"} (a row with no
    name is dropped, which is how one is removed), plus `declare`, a placeholder name of the
    texts made a variable. Raises `ValidationError` keyed `name-<n>`, `type-<n>`, `value-<n>`
    for row n, or `__all__`; a value its type refuses is refused here, an empty one is not (it
    is asked for when a request uses it)."""
    conversation = conversation_for_run(user=user, conversation_id=conversation_id)
    kept = [
        {"name": row.get("name", "").strip(), "type": row.get("type", "text"), "value": row.get("value", "")}
        for row in rows
        if row.get("name", "").strip()
    ]
    if declare and declare not in {row["name"] for row in kept}:
        kept.append(Variable(name=declare).as_json())
    errors: dict[str, list[str]] = {}
    for issue in variables_problems(kept, "$"):
        index, _, field = issue.path.removeprefix("$[").partition("].")
        key = f"{field or 'name'}-{index}" if index.isdigit() else "__all__"
        errors.setdefault(key, []).append(issue.message)
    if not errors:
        for name, problem in values_problems(variables_read(kept)).items():
            row_at = next(position for position, row in enumerate(kept) if row["name"] == name)
            errors[f"value-{row_at}"] = [problem]
    if errors:
        raise ValidationError(errors)
    before = _setup_now(conversation)
    conversation.variables = kept
    _setup_save(conversation, before, ["variables"])
    return conversation


TITLE_MAX_CHARS = Conversation._meta.get_field("title").max_length or 200


def conversation_rename(*, user: User, conversation_id: int, title: str) -> Conversation:
    """Give the conversation a title of the user's. It keeps its place in the list (renaming is
    not using it). Raises `ConversationNotFound`, `PermissionDenied` (viewers) or
    `ValidationError` keyed `title`."""
    conversation = conversation_for_run(user=user, conversation_id=conversation_id)
    title = " ".join(title.split())  # one line, as the list and the page show it
    if not title:
        raise ValidationError({"title": "Type a title."})
    if len(title) > TITLE_MAX_CHARS:
        raise ValidationError({"title": f"A title can be at most {TITLE_MAX_CHARS} characters."})
    if not is_storable(title):
        raise ValidationError({"title": "The title contains a character that cannot be stored."})
    conversation.title = title
    conversation.save(update_fields=["title"])
    return conversation


def conversation_delete(*, user: User, conversation_id: int) -> None:
    """Delete the conversation with its messages and images, and the images' files once the
    deletion commits. Its usage records stay: they name the conversation by id, not by a
    foreign key, and keep what it cost in the log and the dashboard ("Conversation #12
    (deleted)"). Raises `ConversationNotFound` or `PermissionDenied` (viewers)."""
    conversation = conversation_for_run(user=user, conversation_id=conversation_id)
    storage = Attachment._meta.get_field("file").storage
    with transaction.atomic():
        names = [
            name
            for name in Attachment.objects.filter(conversation=conversation).values_list("file", flat=True)
            if name
        ]
        conversation.delete()  # messages and attachments cascade
        transaction.on_commit(lambda: _files_delete(storage, names))


def _files_delete(storage: Any, names: list[str]) -> None:
    for name in names:
        storage.delete(name)


def conversation_model_change(
    *, user: User, conversation_id: int, connection_id: int, model_id: str
) -> Conversation:
    """Send the conversation's next turns to another connection of its team, or another model.

    The history goes with it; earlier answers keep the model that served them (their usage
    records say which). Raises `ConversationNotFound`, `PermissionDenied` (viewers) or
    `ValidationError` keyed by form field: another team's connection, a model the connection
    does not serve, or settings the new model cannot take (a JSON schema, tools), which must be
    changed first since every turn sends them.
    """
    conversation = conversation_for_run(user=user, conversation_id=conversation_id)
    connection, model_id = connection_for_run(user=user, connection_id=connection_id, model_id=model_id)
    if connection.team_id != conversation.team_id:
        raise ValidationError({"connection": "Choose one of this conversation's team's connections."})
    connection_model_check(connection=connection, model_id=model_id)
    caps = request_capabilities(connection=connection, model_id=model_id, day=timezone.now().date())
    response_format = conversation.response_format or {}
    if response_format.get("type") == JSON_SCHEMA and not caps.json_schema:
        raise ValidationError(
            {"model_id": f"{caps.json_schema_reason} Set the response format to text or JSON object first."}
        )
    support = tools_support(model_id=model_id)
    if conversation.tools and not support.allowed:
        raise ValidationError({"model_id": f"{support.reason} Remove this conversation's tools first."})
    before = _setup_now(conversation)
    conversation.connection = connection
    conversation.model_id = model_id
    _setup_save(conversation, before, ["connection", "model_id"])
    return conversation
