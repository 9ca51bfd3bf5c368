"""What chat keeps of an end user, for `usage.erasure` (issue 37): the id written in the team's
conversations (titles, system prompts and their changes, variables, messages, tool calls) and
comparisons (turns and answers), replaced by its tombstone. Chat requests name no end user (the
composer sends no `user` field and no attribution header), so there is nothing else to find."""

from __future__ import annotations

from playground.chat.models import (
    ComparisonAnswer,
    ComparisonTurn,
    Conversation,
    Message,
    SystemPromptChange,
)
from playground.usage.erasure import Columns, Erasure


class ChatEraser:
    tables = (Message, Conversation, SystemPromptChange, ComparisonTurn, ComparisonAnswer)

    def erase(self, run: Erasure) -> dict[str, int]:
        team = run.team_id
        return {
            "chat_messages": run.scrubbed(
                Message.objects.filter(conversation__team_id=team),
                Columns(text=("content", "reasoning"), json=("tool_calls",)),
            ),
            "conversations": run.scrubbed(
                Conversation.objects.filter(team_id=team),
                Columns(text=("title", "system_prompt"), json=("variables",)),
            )
            + run.scrubbed(
                SystemPromptChange.objects.filter(conversation__team_id=team),
                Columns(text=("before", "after")),
            ),
            "comparison_texts": run.scrubbed(
                ComparisonTurn.objects.filter(comparison__team_id=team), Columns(text=("content",))
            )
            + run.scrubbed(
                ComparisonAnswer.objects.filter(turn__comparison__team_id=team),
                Columns(text=("content", "reasoning")),
            ),
        }
