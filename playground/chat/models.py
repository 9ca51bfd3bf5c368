"""Conversations and their messages."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models

from playground.accounts.models import Team
from playground.presets.models import PresetVersion
from playground.providers.models import ProviderConnection
from playground.usage.models import UsageRecord, UsageStatus

# An answer whose request ended so is a failed turn, whatever text it streamed first.
FAILED_STATUSES = frozenset({UsageStatus.REJECTED, UsageStatus.UPSTREAM_ERROR, UsageStatus.TIMEOUT})


def tool_choice_default() -> str:
    """A callable, as Django asks of JSONField defaults."""
    return "auto"


class Conversation(models.Model):
    # No index of its own: (team, -updated_at, -id) below starts with the team and serves every
    # team lookup; a lone team index only gives PostgreSQL a worse plan to pick for the list.
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="conversations", db_index=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="conversations")
    connection = models.ForeignKey(ProviderConnection, null=True, on_delete=models.SET_NULL, related_name="+")
    model_id = models.CharField(max_length=200)
    title = models.CharField(max_length=200, blank=True)
    system_prompt = models.TextField(blank=True)
    # Sent as x-session-affinity when `use_affinity` is on, so the prompt prefix stays cached.
    affinity_key = models.CharField(max_length=120, blank=True)
    use_affinity = models.BooleanField(default=True)
    # The composer's settings, sent with every turn (see playground.chat.domain.composer).
    # Sampling and reasoning parameters the user set; absent keys take the model's defaults.
    parameters = models.JSONField(default=dict, blank=True)
    # OpenAI function tools; each may carry "mocks" (saved results), which are never sent.
    tools = models.JSONField(default=list, blank=True)
    # "auto" | "none" | "required" | {"type": "function", "function": {"name": ...}}
    tool_choice = models.JSONField(default=tool_choice_default, blank=True)
    parallel_tool_calls = models.BooleanField(default=True)
    auto_mock_steps = models.PositiveSmallIntegerField(default=0)  # 0: the user answers every call
    response_format = models.JSONField(null=True, blank=True)  # None: text
    # Prompt variables: [{"name", "type": "text" | "number" | "json", "value"}], filled into the
    # `{{name}}` placeholders of the system prompt and messages when a turn is sent
    # (presets.variables); the stored texts keep their placeholders.
    variables = models.JSONField(default=list, blank=True)
    # The last message of the branch shown and continued: the path from it up through
    # `Message.parent` is the history the next request sends (see chat.domain.branches).
    current_leaf = models.ForeignKey(
        "Message", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # The preset version whose setup this conversation has: set when it starts from one or is saved
    # as one, cleared when a setting changes; its turns' usage records name it.
    preset_version = models.ForeignKey(
        PresetVersion, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        # Most recently used first; the id breaks ties so keyset pages neither repeat nor skip.
        ordering = ["-updated_at", "-id"]
        indexes = [
            # The conversation list walks it per team, newest first (chat.selectors.conversation_page).
            models.Index(fields=["team", "-updated_at", "-id"], name="chat_conv_team_recent"),
        ]

    def __str__(self) -> str:
        return self.title or f"Conversation {self.pk}"


class SystemPromptChange(models.Model):
    """A new version of a conversation's system prompt, made mid-conversation: the turns after
    `created_at` send `after` (the history shows the change between the turns it falls between;
    the cache-break detector names the break it causes `system_changed`)."""

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="system_changes")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    before = models.TextField(blank=True)
    after = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"System prompt of conversation {self.conversation_id} changed at {self.created_at}"


class MessageRole(models.TextChoices):
    USER = "user", "User"
    ASSISTANT = "assistant", "Assistant"
    TOOL = "tool", "Tool result"


class Message(models.Model):
    """One message of a conversation's tree: `parent` is the message before it on its branch
    (None for a first message). Editing a question or regenerating an answer adds a sibling."""

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="messages")
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.CASCADE, related_name="children"
    )
    role = models.CharField(max_length=10, choices=MessageRole.choices)
    content = models.TextField(blank=True)
    reasoning = models.TextField(blank=True)
    # Assistant messages: the calls the model asked for, assembled by index, each
    # {"index", "id", "name", "arguments", "valid", "errors"}. Ids may repeat (Kimi): never a key.
    tool_calls = models.JSONField(default=list, blank=True)
    # Tool messages: which call of which assistant message this answers, and the id sent back.
    reply_to = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.CASCADE, related_name="tool_results"
    )
    tool_call_index = models.PositiveSmallIntegerField(null=True, blank=True)
    tool_call_id = models.CharField(max_length=200, blank=True)
    # Assistant messages under a JSON response format: {"valid": bool, "errors": [{"path", "message"}]}.
    structured = models.JSONField(null=True, blank=True)
    # Set on assistant messages once the answer ends: the request's usage record.
    usage_record = models.OneToOneField(
        "usage.UsageRecord", null=True, blank=True, on_delete=models.SET_NULL, related_name="message"
    )
    # Written by the user, not sent or answered: an example answer (few-shot), a message inserted
    # into the history (`chat.services.branching.chat_message_write`).
    written = models.BooleanField(default=False)
    # A fork's copy of an answer: the original answer's usage record, shown on the copy (the model
    # that answered, the usage line) but not its own: the record stays with the conversation it
    # cost, whose totals count it once.
    copied_record = models.ForeignKey(
        "usage.UsageRecord", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    # When a branch switch last made this message the end of the branch on screen (its creation
    # is its first visit): the arrows come back to the leaf the user was on last
    # (`chat.domain.branches.MessageTree.last_visited_leaf`).
    visited_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"{self.role}: {self.content[:40]}"

    @property
    def is_failed_answer(self) -> bool:
        """An answer whose request was refused (a budget), failed (an upstream error, a timeout) or
        stopped before any output: its turn is left out of later requests and may be deleted.
        Reads `usage_record`: load it with the message in async code."""
        if self.role != MessageRole.ASSISTANT:
            return False
        return answer_failed(self.usage_record, content=self.content, tool_calls=self.tool_calls)

    @property
    def shown_record(self) -> UsageRecord | None:
        """The usage record its answer shows: its own, or, on a fork's copy, the original's."""
        return self.usage_record or self.copied_record


def answer_failed(record: UsageRecord | None, *, content: str, tool_calls: list[Any]) -> bool:
    """An answer (a message's, a compare column's) whose request was refused, failed or stopped
    before any output: its turn is left out of the requests after it."""
    if record is not None and record.status in FAILED_STATUSES:
        return True
    return not content and not tool_calls


class Attachment(models.Model):
    """An image sent with a user message: re-encoded (no metadata), stored through Django's
    storage API, and served only to members of the conversation's team through a view."""

    message = models.ForeignKey(
        Message, null=True, blank=True, on_delete=models.CASCADE, related_name="attachments"
    )
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="attachments")
    file = models.FileField(upload_to="attachments/%Y/%m/")
    sha256 = models.CharField(max_length=64)
    content_type = models.CharField(max_length=40)
    width = models.PositiveIntegerField()
    height = models.PositiveIntegerField()
    size_bytes = models.PositiveIntegerField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"{self.content_type} {self.width}x{self.height} ({self.sha256[:12]})"


class Comparison(models.Model):
    """2-4 targets (`ComparisonColumn`) side by side, chatting in sync: each user message
    (`ComparisonTurn`) goes to every column, and each column answers it in its own history.

    Holds its own copy of the setup it was started with (from a conversation, or typed on a
    blank page), so a rerun sends the same thing however the conversation changed since.
    """

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="comparisons", db_index=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="comparisons")
    # The conversation whose system prompt, tools and response format it took, if any.
    conversation = models.ForeignKey(
        Conversation, null=True, blank=True, on_delete=models.SET_NULL, related_name="comparisons"
    )
    # Or the preset version whose setup it took (its columns' records name it), by id as usage
    # records do.
    preset_version_id = models.BigIntegerField(null=True, blank=True)
    prompt = models.TextField()  # the opening message (turn 1's): the comparison's title
    system_prompt = models.TextField(blank=True)
    tools = models.JSONField(default=list, blank=True)
    tool_choice = models.JSONField(default=tool_choice_default, blank=True)
    parallel_tool_calls = models.BooleanField(default=True)
    response_format = models.JSONField(null=True, blank=True)
    variables = models.JSONField(default=list, blank=True)  # as Conversation.variables
    runs = models.PositiveIntegerField(default=0)  # runs started (turns, reruns); 0: the page starts turn 1
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["team", "-created_at", "-id"], name="chat_comparison_team_recent")]

    def __str__(self) -> str:
        return f"Comparison {self.pk}: {self.prompt[:40]}"


class ComparisonColumn(models.Model):
    """One target of a comparison (connection, model, parameters, affinity); its answers are
    `ComparisonAnswer`s, one per turn and run.

    Each answer is an ordinary metered request whose record's source is
    `compare-column:<id>:<attempt>`: `attempt` counts the column's requests over all its turns.
    """

    comparison = models.ForeignKey(Comparison, on_delete=models.CASCADE, related_name="columns")
    position = models.PositiveSmallIntegerField()
    connection = models.ForeignKey(ProviderConnection, null=True, on_delete=models.SET_NULL, related_name="+")
    model_id = models.CharField(max_length=200)
    parameters = models.JSONField(default=dict, blank=True)
    use_affinity = models.BooleanField(default=True)
    affinity_key = models.CharField(max_length=120, blank=True)
    attempt = models.PositiveIntegerField(default=0)  # requests started; the record source's attempt
    # The conversation "Continue with this one" made of it (opened again on a second press, until
    # the comparison runs again).
    continued_as = models.ForeignKey(
        Conversation, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["position"]
        constraints = [
            models.UniqueConstraint(fields=["comparison", "position"], name="chat_comparison_column_position")
        ]

    def __str__(self) -> str:
        return f"Column {self.position} of comparison {self.comparison_id}: {self.model_id}"


class ComparisonTurn(models.Model):
    """One user message of a comparison, sent to every column (turn 1 is the opening prompt)."""

    comparison = models.ForeignKey(Comparison, on_delete=models.CASCADE, related_name="turns")
    number = models.PositiveSmallIntegerField()  # 1, 2, ...
    content = models.TextField()
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["number"]
        constraints = [
            models.UniqueConstraint(fields=["comparison", "number"], name="chat_comparison_turn_number")
        ]

    def __str__(self) -> str:
        return f"Turn {self.number} of comparison {self.comparison_id}: {self.content[:40]}"


class ComparisonAnswer(models.Model):
    """A column's answer to a turn in one run of it: the turn's first run is `run` 1, each rerun
    the next. The newest run's answer is the column's, which its later turns send as history;
    the earlier ones stay as the comparison's history.

    Stored when the run starts (`ended_at` None while it streams) and filled in when its metered
    call settles, or at once with the `refusal` when nothing could be sent.
    """

    turn = models.ForeignKey(ComparisonTurn, on_delete=models.CASCADE, related_name="answers")
    column = models.ForeignKey(ComparisonColumn, on_delete=models.CASCADE, related_name="answers")
    run = models.PositiveSmallIntegerField()
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    content = models.TextField(blank=True)
    reasoning = models.TextField(blank=True)
    tool_calls = models.JSONField(default=list, blank=True)  # as Message.tool_calls
    structured = models.JSONField(null=True, blank=True)  # as Message.structured
    refusal = models.TextField(blank=True)  # why nothing was sent (a deleted connection, a prompt too long)
    usage_record = models.ForeignKey(
        "usage.UsageRecord", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    ended_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["turn_id", "run", "column_id"]
        constraints = [
            models.UniqueConstraint(fields=["turn", "column", "run"], name="chat_comparison_answer_run")
        ]

    def __str__(self) -> str:
        return f"Answer of column {self.column_id} to turn {self.turn_id} (run {self.run})"

    @property
    def is_failed(self) -> bool:
        """Refused, failed or stopped before any output (`answer_failed`); reads `usage_record`."""
        return answer_failed(self.usage_record, content=self.content, tool_calls=self.tool_calls)
