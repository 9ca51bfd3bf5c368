"""Compare: one prompt sent at once to 2-4 targets, each column an ordinary metered request.

A comparison holds the setup (system prompt, tools, response format) taken from a
conversation or typed on a blank page, and one column per target (connection, model,
parameters, affinity). A column's request is what a conversation with those settings would
send for the prompt: `comparison_setup` makes that conversation (unsaved) and the composer
builds the request from it (`chat_request_build`), so parameters a model does not take are
never sent, and JSON output goes out with `stream: false` where it cannot stream, as in chat.

Each run of a column goes through the one metered call with path `compare` and the source
`compare-column:<id>:<attempt>`: it holds the team's budget (a column over budget is refused
on its own; the others still run), and its record is in the log and the dashboard like any
other. "Continue with this one" turns a column into a conversation holding its turn.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncGenerator, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from playground.accounts.permissions import require_run_role
from playground.chat.compare.models import Comparison, ComparisonColumn
from playground.chat.compare.selectors import comparison_get
from playground.chat.domain.composer import chat_request_build, parameters_check
from playground.chat.domain.tools import tool_call_record
from playground.chat.models import Conversation, Message, MessageRole
from playground.chat.selectors import conversation_get
from playground.chat.services.turns import MAX_MESSAGE_CHARS, TITLE_CHARS, require_fits_context
from playground.lib.storable import is_storable
from playground.presets.selectors import preset_version_setup
from playground.providers.adapters import ChatRequest, adapter_for
from playground.providers.answer_collector import AnswerCollector
from playground.providers.connection_check import connection_model_check
from playground.providers.events import StreamEvent
from playground.providers.request_rules import request_capabilities
from playground.providers.selectors import connection_for_run
from playground.providers.structured_answers import structured_check
from playground.usage.calls.call import MeteredCall
from playground.usage.calls.kinds import compare_column_call
from playground.usage.calls.settlement import Alone
from playground.usage.metering import Outcome
from playground.usage.models import UsageRecord

MIN_TARGETS = 2
MAX_TARGETS = 4
# What a comparison takes from the conversation or preset version it starts from.
SETUP_FIELDS = ("system_prompt", "tools", "tool_choice", "parallel_tool_calls", "response_format")


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


def comparison_create(
    *,
    user: User,
    prompt: str,
    targets: Sequence[Target],
    system_prompt: str = "",
    conversation_id: int | None = None,
    preset_version_id: int | None = None,
) -> Comparison:
    """Check every target and store the comparison, all or nothing (it is run from its page).

    From a conversation (or a preset version), the system prompt, tools, tool choice and
    response format are the conversation's (the version's; `system_prompt` is ignored) and its
    parameters are each column's defaults; a version's columns' records name it.
    Raises `ValidationError` keyed by field (`prompt`, `targets`, `<n>-connection`,
    `<n>-model`, `<n>-<parameter>` for the column at position n), `PermissionDenied` (viewers).
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
    columns = [
        _column(
            user=user, comparison=comparison, target=target, position=n, base=base_parameters, errors=errors
        )
        for n, target in enumerate(targets)
    ]
    if errors:
        raise ValidationError(errors)
    with transaction.atomic():
        comparison.save()
        for column in columns:
            column.comparison = comparison
        ComparisonColumn.objects.bulk_create(columns)
    return comparison


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
    caps = request_capabilities(spec=connection.spec, model_id=model_id, day=timezone.now().date())
    try:
        chosen = parameters_check(caps=caps, parameters=target.parameters)
    except ValidationError as exc:
        for name, messages in exc.message_dict.items():
            errors.setdefault(f"{position}-{name}", []).extend(messages)
        return column
    column.connection, column.model_id, column.use_affinity = connection, model_id, target.use_affinity
    column.parameters = {**base, **chosen}
    try:  # what would be sent (tools a model does not take, a schema it cannot follow) is refused now
        comparison_request_build(comparison=comparison, column=column)
    except ValidationError as exc:
        errors.setdefault(f"{position}-model", []).extend(exc.messages)
    return column


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
        affinity_key=column.affinity_key,
        use_affinity=column.use_affinity,
        parameters=column.parameters,
        tools=comparison.tools,
        tool_choice=comparison.tool_choice,
        parallel_tool_calls=comparison.parallel_tool_calls,
        response_format=comparison.response_format,
    )


def comparison_request_build(*, comparison: Comparison, column: ComparisonColumn) -> ChatRequest:
    """A column's request: the system prompt and the prompt, with the column's settings."""
    messages: list[dict[str, Any]] = []
    if comparison.system_prompt.strip():
        messages.append({"role": "system", "content": comparison.system_prompt})
    messages.append({"role": "user", "content": comparison.prompt})
    setup = comparison_setup(comparison=comparison, column=column)
    return chat_request_build(conversation=setup, messages=messages, day=timezone.now().date())


@dataclass
class ColumnRun:
    """One column's request of a run. `refusal` (nothing was sent) or `events()` then the stored answer."""

    comparison: Comparison
    column: ComparisonColumn
    call: MeteredCall | None
    refusal: str = ""  # the column could not even be built (its connection was deleted, ...)
    answer: AnswerCollector = field(default_factory=AnswerCollector)

    def __post_init__(self) -> None:
        if self.call is not None:
            self.call.settlement = Alone(self._save_answer)

    async def events(self) -> AsyncGenerator[StreamEvent]:
        """The upstream's events; the metered call writes the record and then the column's answer."""
        assert self.call is not None
        async with aclosing(self.call.events()) as events:
            async for event in events:
                self.answer.observe(event)
                yield event

    def _save_answer(self, record: UsageRecord | None, outcome: Outcome) -> None:
        column = self.column
        column.content = self.answer.text
        column.reasoning = self.answer.reasoning
        column.tool_calls = [tool_call_record(call, self.comparison.tools) for call in self.answer.tool_calls]
        column.structured = structured_check(
            text=self.answer.text, response_format=self.comparison.response_format
        )
        column.usage_record = record
        column.save(update_fields=["content", "reasoning", "tool_calls", "structured", "usage_record"])


def comparison_run_start(*, user: User, comparison_id: int, first: bool = False) -> list[ColumnRun]:
    """Start a run of every column: each column's answer is cleared and its attempt counted.

    `first`: the page's own start of a comparison never run; returns [] when it has run
    already (a reload, a second tab), so opening the page never sends it again. Rerun all
    is `first=False`. Blocking: call via `sync_to_async`.
    """
    comparison = comparison_for_run(user=user, comparison_id=comparison_id)
    with transaction.atomic():
        runs = Comparison.objects.filter(pk=comparison.pk)
        if first and not runs.filter(runs=0).update(runs=1):
            return []
        if not first:
            runs.update(runs=F("runs") + 1)
        columns = list(comparison.columns.select_for_update(of=("self",)).select_related("connection"))
        for column in columns:
            column.attempt += 1
            column.content = column.reasoning = ""
            column.tool_calls, column.structured, column.usage_record = [], None, None
            column.continued_as = None  # "Continue" now takes the new answer
        ComparisonColumn.objects.bulk_update(
            columns,
            ["attempt", "content", "reasoning", "tool_calls", "structured", "usage_record", "continued_as"],
        )
    return [_column_run(user=user, comparison=comparison, column=column) for column in columns]


def _column_run(*, user: User, comparison: Comparison, column: ComparisonColumn) -> ColumnRun:
    connection = column.connection
    if connection is None:
        return ColumnRun(comparison, column, None, refusal="This target's connection was deleted.")
    try:
        request = comparison_request_build(comparison=comparison, column=column)
        window = require_fits_context(request)
    except ValidationError as exc:
        return ColumnRun(comparison, column, None, refusal=" ".join(exc.messages))
    call = compare_column_call(
        adapter=adapter_for(connection),
        request=request,
        context_window=window,
        team_id=comparison.team_id,
        user_id=user.pk,
        connection_id=connection.pk,
        model_id=column.model_id,
        preset_version_id=comparison.preset_version_id,
        column_id=column.pk,
        attempt=column.attempt,
    )
    return ColumnRun(comparison, column, call)


def comparison_continue(*, user: User, comparison_id: int, column_id: int) -> Conversation:
    """The conversation a column becomes: its target and settings, the prompt and the column's
    answer as its first turn (the answer keeps the column's usage record). A column continued
    before opens the same conversation again, while it exists.

    Raises `ComparisonNotFound` (another team's, or no such column), `PermissionDenied`
    (viewers), `ValidationError` (the column has no answer to continue from).
    """
    comparison = comparison_for_run(user=user, comparison_id=comparison_id)
    with transaction.atomic():
        column = (
            comparison.columns.select_for_update(of=("self",))
            .select_related("continued_as", "usage_record")
            .filter(pk=column_id)
            .first()
        )
        if column is None:
            raise ComparisonNotFound(column_id)
        if column.continued_as is not None:
            return column.continued_as
        if column.connection_id is None:
            raise ValidationError("This target's connection was deleted: it cannot be continued.")
        if column.usage_record is None or not (column.content or column.tool_calls):
            raise ValidationError("This column has no answer to continue from: run it first.")
        conversation = comparison_setup(comparison=comparison, column=column)
        conversation.user = user
        conversation.save()
        question = Message.objects.create(
            conversation=conversation, role=MessageRole.USER, content=comparison.prompt
        )
        # The one branch of the new conversation: the question, then the column's answer.
        conversation.current_leaf = Message.objects.create(
            conversation=conversation,
            parent=question,
            role=MessageRole.ASSISTANT,
            content=column.content,
            reasoning=column.reasoning,
            tool_calls=column.tool_calls,
            structured=column.structured,
            usage_record=column.usage_record,
        )
        conversation.save(update_fields=["current_leaf"])
        column.continued_as = conversation
        column.save(update_fields=["continued_as"])
    return conversation
