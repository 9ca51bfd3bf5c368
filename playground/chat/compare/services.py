"""Compare: 2-4 targets side by side, chatting in sync; each column's request an ordinary metered one.

A comparison holds the setup (system prompt, tools, response format) taken from a
conversation or typed on a blank page, and one column per target (connection, model,
parameters, affinity). A column's request is what a conversation with those settings would
send: `comparison_setup` makes that conversation (unsaved) and the composer builds the request
from it (`chat_request_build`), so parameters a model does not take are never sent, and JSON
output goes out with `stream: false` where it cannot stream, as in chat.

The user's messages are the comparison's turns; each column answers each of them in its own
history (`compare.runs`). "Continue with this one" turns a column into a conversation holding
all its turns.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict, Unpack

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from playground.accounts.permissions import require_run_role
from playground.chat.compare.models import Comparison, ComparisonColumn, ComparisonTurn
from playground.chat.compare.selectors import AnswerCells, comparison_answers, comparison_get
from playground.chat.domain.composer import chat_request_build, parameters_check
from playground.chat.models import Conversation, Message, MessageRole
from playground.chat.selectors import conversation_get
from playground.chat.services.turns import MAX_MESSAGE_CHARS, TITLE_CHARS
from playground.lib.storable import is_storable
from playground.presets.selectors import preset_version_setup
from playground.presets.variables import (
    Variable,
    VariablesUnfilled,
    messages_fill,
    variables_declared,
    variables_read,
)
from playground.providers.adapters import ChatRequest
from playground.providers.connection_check import connection_model_check
from playground.providers.request_rules import request_capabilities
from playground.providers.selectors import connection_for_run

MIN_TARGETS = 2
MAX_TARGETS = 4
# What a comparison takes from the conversation or preset version it starts from.
SETUP_FIELDS = (
    "system_prompt",
    "variables",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "response_format",
)


class ComparisonNotFound(Exception):
    """No comparison (or column) with that id in the user's teams (answered as 404)."""


@dataclass(frozen=True)
class Target:
    """One column as the form gives it: `parameters` are the form's (checked against the model)."""

    connection_id: int
    model_id: str
    parameters: dict[str, Any] = field(default_factory=dict)
    use_affinity: bool = True


def comparison_for_run(*, user: User, comparison_id: int) -> Comparison:
    """The user's comparison, if they may run it: `ComparisonNotFound` or `PermissionDenied`."""
    comparison = comparison_get(user=user, comparison_id=comparison_id)
    if comparison is None:
        raise ComparisonNotFound(comparison_id)
    require_run_role(user=user, team_id=comparison.team_id)
    return comparison


@dataclass(frozen=True)
class ComparisonDraft:
    """A comparison checked and not stored yet: what the form's pre-flight prices, and Compare stores."""

    comparison: Comparison
    columns: list[ComparisonColumn]


class SetupSource(TypedDict, total=False):
    """Where a comparison's setup comes from, as `comparison_draft` takes it."""

    system_prompt: str
    conversation_id: int | None
    preset_version_id: int | None
    variable_values: Mapping[str, str]  # the form's values of the prompt variables, by name


def comparison_create(
    *, user: User, prompt: str, targets: Sequence[Target], **source: Unpack[SetupSource]
) -> Comparison:
    """Check every target (`comparison_draft`) and store the comparison with its turn 1, all or
    nothing (it is run from its page)."""
    draft = comparison_draft(user=user, prompt=prompt, targets=targets, **source)
    comparison = draft.comparison
    with transaction.atomic():
        comparison.save()
        for column in draft.columns:
            column.comparison = comparison
        ComparisonColumn.objects.bulk_create(draft.columns)
        ComparisonTurn.objects.create(comparison=comparison, number=1, content=comparison.prompt, user=user)
    return comparison


def comparison_draft(
    *,
    user: User,
    prompt: str,
    targets: Sequence[Target],
    system_prompt: str = "",
    conversation_id: int | None = None,
    preset_version_id: int | None = None,
    variable_values: Mapping[str, str] | None = None,
) -> ComparisonDraft:
    """The comparison the form describes, every target checked, not stored.

    From a conversation (or a preset version), the system prompt, tools, tool choice and
    response format are the conversation's (the version's; `system_prompt` is ignored) and its
    parameters are each column's defaults; a version's columns' records name it.
    Raises `ValidationError` keyed by field (`prompt`, `targets`, `<n>-connection`,
    `<n>-model`, `<n>-<parameter>` for the column at position n), `ComparisonNotFound` (the
    conversation or version is not the user's teams'), `PermissionDenied` (viewers).
    """
    prompt = prompt.strip()
    errors: dict[str, list[str]] = {}
    if not prompt:
        errors["prompt"] = ["Type the prompt to send."]
    elif len(prompt) > MAX_MESSAGE_CHARS or not is_storable(prompt):
        errors["prompt"] = [
            f"At most {MAX_MESSAGE_CHARS:,} characters, none of them NUL or a lone surrogate."
        ]
    if not MIN_TARGETS <= len(targets) <= MAX_TARGETS:
        errors["targets"] = [f"Compare {MIN_TARGETS} to {MAX_TARGETS} targets."]
    comparison = Comparison(user=user, prompt=prompt, system_prompt=system_prompt)
    base_parameters: dict[str, Any] = {}
    if conversation_id is not None:
        source = conversation_get(user=user, conversation_id=conversation_id)
        if source is None:
            raise ComparisonNotFound(conversation_id)
        require_run_role(user=user, team_id=source.team_id)
        comparison.conversation = source
        comparison.team_id = source.team_id
        for name in SETUP_FIELDS:
            setattr(comparison, name, getattr(source, name))
        base_parameters = dict(source.parameters or {})
    elif preset_version_id is not None:
        setup = preset_version_setup(user=user, version_id=preset_version_id)
        if setup is None or setup.team_id is None:
            raise ComparisonNotFound(preset_version_id)
        require_run_role(user=user, team_id=setup.team_id)
        comparison.team_id = setup.team_id
        comparison.preset_version_id = setup.version_id
        for name in SETUP_FIELDS:
            setattr(comparison, name, getattr(setup, name))
        base_parameters = dict(setup.parameters)
    variables = _variables(
        comparison, variable_values or {}, blank=conversation_id is None and preset_version_id is None
    )
    comparison.variables = [variable.as_json() for variable in variables]
    try:  # said once for the form, not once per column
        messages_fill(
            [{"role": "system", "content": comparison.system_prompt}, {"role": "user", "content": prompt}],
            variables,
        )
    except VariablesUnfilled as exc:
        errors["variables"] = exc.messages
    columns = [
        _column(
            user=user, comparison=comparison, target=target, position=n, base=base_parameters, errors=errors
        )
        for n, target in enumerate(targets)
    ]
    if errors:
        raise ValidationError(errors)
    return ComparisonDraft(comparison, columns)


def _column(
    *,
    user: User,
    comparison: Comparison,
    target: Target,
    position: int,
    base: dict[str, Any],
    errors: dict[str, list[str]],
) -> ComparisonColumn:
    """One column, checked as a conversation's settings are; problems go into `errors`."""
    column = ComparisonColumn(position=position, affinity_key=f"pg-{uuid.uuid4().hex}")
    try:
        connection, model_id = connection_for_run(
            user=user, connection_id=target.connection_id, model_id=target.model_id
        )
        connection_model_check(connection=connection, model_id=model_id)
    except ValidationError as exc:
        errors.setdefault(f"{position}-model", []).extend(exc.messages)
        return column
    if comparison.team_id is None:
        comparison.team_id = connection.team_id  # a blank page's comparison: the first target's team
    if connection.team_id != comparison.team_id:
        errors.setdefault(f"{position}-model", []).append(
            "Every target must be a connection of the same team."
        )
        return column
    caps = request_capabilities(connection=connection, model_id=model_id, day=timezone.now().date())
    try:
        chosen = parameters_check(caps=caps, parameters=target.parameters)
    except ValidationError as exc:
        for name, messages in exc.message_dict.items():
            errors.setdefault(f"{position}-{name}", []).extend(messages)
        return column
    column.connection, column.model_id, column.use_affinity = connection, model_id, target.use_affinity
    column.parameters = {**base, **chosen}
    try:  # what would be sent (tools a model does not take, a schema it cannot follow) is refused now
        comparison_request_build(comparison=comparison, column=column, text=comparison.prompt)
    except VariablesUnfilled:
        pass  # the form says it once (`comparison_draft`)
    except ValidationError as exc:
        errors.setdefault(f"{position}-model", []).extend(exc.messages)
    return column


def _variables(comparison: Comparison, values: Mapping[str, str], *, blank: bool) -> list[Variable]:
    """The comparison's prompt variables, each with the form's value over its source's: the
    conversation's or preset version's, or on a blank page the placeholders of the system prompt
    typed there (text, as the chat's Settings declare them)."""
    declared = (
        variables_declared([], [comparison.system_prompt]) if blank else variables_read(comparison.variables)
    )
    return [Variable(v.name, v.type, values.get(v.name, v.value)) for v in declared]


def comparison_setup(*, comparison: Comparison, column: ComparisonColumn) -> Conversation:
    """The conversation (unsaved) whose next turn a column's request is: its team, target and
    settings. Saved as is, it is what "Continue with this one" opens."""
    return Conversation(
        team_id=comparison.team_id,
        user_id=comparison.user_id,
        connection=column.connection,
        model_id=column.model_id,
        title=comparison.prompt[:TITLE_CHARS],
        system_prompt=comparison.system_prompt,
        variables=comparison.variables,
        affinity_key=column.affinity_key,
        use_affinity=column.use_affinity,
        parameters=column.parameters,
        tools=comparison.tools,
        tool_choice=comparison.tool_choice,
        parallel_tool_calls=comparison.parallel_tool_calls,
        response_format=comparison.response_format,
    )


def comparison_request_build(
    *,
    comparison: Comparison,
    column: ComparisonColumn,
    text: str,
    history: Sequence[dict[str, Any]] = (),
) -> ChatRequest:
    """A column's request for the user's `text` after its `history` (`runs.column_history`): the
    system prompt first, with the column's settings."""
    messages: list[dict[str, Any]] = []
    if comparison.system_prompt.strip():
        messages.append({"role": "system", "content": comparison.system_prompt})
    messages += [*history, {"role": "user", "content": text}]
    setup = comparison_setup(comparison=comparison, column=column)
    return chat_request_build(conversation=setup, messages=messages, day=timezone.now().date())


def comparison_continue(*, user: User, comparison_id: int, column_id: int) -> Conversation:
    """The conversation a column becomes: its target and settings, and every turn it was sent,
    each with the column's newest answer to it (which keeps its usage record, unless a
    conversation continued before holds it). A column continued before opens the same
    conversation again, while it exists and the comparison has not run since.

    Raises `ComparisonNotFound` (another team's, or no such column), `PermissionDenied`
    (viewers), `ValidationError` (the column has no answer to continue from).
    """
    comparison = comparison_for_run(user=user, comparison_id=comparison_id)
    with transaction.atomic():
        column = (
            comparison.columns.select_for_update(of=("self",))
            .select_related("continued_as")
            .filter(pk=column_id)
            .first()
        )
        if column is None:
            raise ComparisonNotFound(column_id)
        if column.continued_as is not None:
            return column.continued_as
        if column.connection_id is None:
            raise ValidationError("This target's connection was deleted: it cannot be continued.")
        cells = AnswerCells(comparison_answers(comparison=comparison))
        turns = [
            (turn, answer)
            for turn in comparison.turns.all()
            if (answer := cells.current(turn.pk, column.pk)) is not None
            and answer.usage_record_id is not None
        ]
        if not any(answer.content or answer.tool_calls for _, answer in turns):
            raise ValidationError("This column has no answer to continue from: run it first.")
        conversation = comparison_setup(comparison=comparison, column=column)
        conversation.user = user
        conversation.save()
        held = set(
            Message.objects.filter(
                usage_record__in=[answer.usage_record_id for _, answer in turns]
            ).values_list("usage_record_id", flat=True)
        )
        parent: Message | None = None
        for turn, answer in turns:  # one branch: each question, then the column's answer to it
            question = Message.objects.create(
                conversation=conversation, parent=parent, role=MessageRole.USER, content=turn.content
            )
            parent = Message.objects.create(
                conversation=conversation,
                parent=question,
                role=MessageRole.ASSISTANT,
                content=answer.content,
                reasoning=answer.reasoning,
                tool_calls=answer.tool_calls,
                structured=answer.structured,
                usage_record_id=None if answer.usage_record_id in held else answer.usage_record_id,
            )
        conversation.current_leaf = parent
        conversation.save(update_fields=["current_leaf"])
        column.continued_as = conversation
        column.save(update_fields=["continued_as"])
    return conversation
