"""The chat WebSocket: a transport adapter over the chat services (`playground.chat.services`).

The skeleton is `sockets.base.StreamingSocket`: a signed-in member of the conversation's team
connects, every message re-reads the session, one turn streams at a time in a task holding
one of the user's concurrent-turn slots, and Stop or a disconnect cancels it and waits for its
record (`ChatTurn.events()` writes it: status client_disconnected; after Stop, error code
stopped_by_user). What is the chat's own: `command()` parses one command
(`sockets.commands`) and hands it to the chat service, which re-checks membership and role
(a role change applies to sockets that are already open); the streamed text goes through
`sockets.relay` (each delta template rendered once per turn, text arriving within one frame
interval sent as one frame). When a turn ends, the service says whether auto-mock mode
continues it (`chat_auto_continue`); the socket streams the turns it is handed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from channels.db import database_sync_to_async
from django.core.exceptions import PermissionDenied, ValidationError

from playground.accounts.selectors import AnyUser
from playground.chat.presenters.messages import message_view
from playground.chat.selectors import aconversation_get
from playground.chat.services.branching import chat_edit_start, chat_regenerate_start
from playground.chat.services.conversations import ConversationNotFound, MessageNotFound
from playground.chat.services.tool_continuations import (
    ToolResultInput,
    ToolResultsRefused,
    chat_auto_continue,
    chat_continue_start,
)
from playground.chat.services.turns import ChatTurn, chat_turn_start
from playground.chat.sockets.base import CLOSE_NOT_FOUND, StreamingSocket
from playground.chat.sockets.commands import (
    ChatCommand,
    ContinueCommand,
    EditCommand,
    RegenerateCommand,
    SendCommand,
    StopCommand,
    chat_command_parse,
)
from playground.usage.insights.cache_break_selectors import BreakShown, break_shown
from playground.usage.insights.cache_break_store import record_break
from playground.usage.insights.runway import Runway
from playground.usage.insights.runway_selectors import conversation_runway

logger = logging.getLogger(__name__)

BUSY = "An answer is still streaming: wait for it to finish, or press Stop."
GONE = "This conversation is no longer available to you."
NO_MESSAGE = "That message is not in this conversation (it may have been deleted): reload the page."


class ChatConsumer(StreamingSocket[ChatCommand]):
    url_kwarg = "conversation_id"
    busy = BUSY
    turn: ChatTurn | None = None
    finished_sent: bool = False

    @property
    def conversation_id(self) -> int:
        return self.object_id

    async def find(self, *, user: AnyUser, object_id: int) -> int | None:
        conversation = await aconversation_get(user=user, conversation_id=object_id)
        return None if conversation is None else conversation.pk

    def mark_stopped(self, *, by_user: bool) -> None:
        if by_user and self.turn is not None:
            self.turn.call.stopped_by_user = True

    def parse(self, text_data: str | None) -> ChatCommand:
        return chat_command_parse(text_data)

    async def command(self, command: ChatCommand) -> None:
        match command:
            case StopCommand():
                if await self.stop(by_user=True) and self.turn is not None:
                    await self._send_finished(self.turn)
            case SendCommand(text=text, attachment_ids=attachment_ids, after=after):
                await self._start_turn(lambda: self._open_turn(text, attachment_ids, after))
            case ContinueCommand():
                await self._start_turn(lambda: self._open_continue(command))
            case EditCommand(message_id=message_id, text=text):
                await self._start_turn(lambda: self._open_branch(chat_edit_start, message_id, text=text))
            case RegenerateCommand(message_id=message_id):
                await self._start_turn(lambda: self._open_branch(chat_regenerate_start, message_id))

    # --- turns ---------------------------------------------------------------------------

    async def _start_turn(self, open_turn: Callable[[], Awaitable[ChatTurn | None]]) -> None:
        await self.start(open_turn, self._run_turn, name=lambda turn: f"chat-turn-{turn.user_message.pk}")

    async def _open_turn(
        self, text: str, attachment_ids: tuple[int, ...] = (), after: int | None = None
    ) -> ChatTurn | None:
        """Save the question and show it; None (after a notice) when the service refuses."""
        turn = await self._refusable(
            database_sync_to_async(chat_turn_start),
            user=self.scope["user"],
            conversation_id=self.conversation_id,
            text=text,
            attachment_ids=attachment_ids,
            after=after,
        )
        if turn is None:
            return None
        self.turn, self.finished_sent = turn, False
        await self._send_template(
            "chat/ws/turn_started.html",
            {
                "user_message": message_view(turn.user_message),
                "key": _key(turn),
                "conversation": turn.conversation,
                "whole_answer": not turn.call.request.stream,  # JSON output this model cannot stream
            },
        )
        return turn

    async def _open_branch(
        self, service: Callable[..., ChatTurn], message_id: int, **kwargs: Any
    ) -> ChatTurn | None:
        """An edited question or a regenerated answer: the messages it replaces leave the page,
        and the new branch streams in their place."""
        turn = await self._refusable(
            database_sync_to_async(service),
            user=self.scope["user"],
            conversation_id=self.conversation_id,
            message_id=message_id,
            **kwargs,
        )
        if turn is None:
            return None
        self.turn, self.finished_sent = turn, False
        context = {
            "replaced": turn.replaced,
            "user_message": message_view(turn.user_message, alternatives=turn.question_siblings),
            "edited": bool(turn.question_siblings),  # a new question (a regenerated answer has none)
            "key": _key(turn),
            "conversation": turn.conversation,
            "whole_answer": not turn.call.request.stream,
        }
        await self._send_template("chat/ws/branch_started.html", context)
        return turn

    async def _open_continue(self, command: ContinueCommand) -> ChatTurn | None:
        """Save the tool results and show them with a new answer streaming under them."""
        results = {
            index: ToolResultInput(text=command.texts.get(index, ""), mock=command.mocks.get(index))
            for index in {*command.texts, *command.mocks}
        }
        turn = await self._refusable(
            database_sync_to_async(chat_continue_start),
            user=self.scope["user"],
            conversation_id=self.conversation_id,
            message_id=command.message_id,
            results=results,
        )
        if turn is not None:
            await self._show_continue(turn)
        return turn

    async def _auto_continue(self, turn: ChatTurn) -> ChatTurn | None:
        """The turn the service continues `turn` with (auto-mock mode), shown; None: the user answers."""
        next_turn = await self._refusable(chat_auto_continue, user=self.scope["user"], turn=turn)
        if next_turn is not None:
            await self._show_continue(next_turn)
        return next_turn

    async def _show_continue(self, turn: ChatTurn) -> None:
        self.turn, self.finished_sent = turn, False
        assert turn.continues is not None
        answered = message_view(turn.continues, tools=turn.conversation.tools, results=turn.tool_results)
        context = {"message": answered, "key": _key(turn), "oob_target": answered.dom_id, "can_send": True}
        await self._send_template("chat/ws/continue_started.html", context)

    async def _refusable(
        self, service: Callable[..., Awaitable[ChatTurn | None]], **kwargs: Any
    ) -> ChatTurn | None:
        """Run a turn-starting service; a refusal becomes a notice (or closes the socket) and None."""
        try:
            return await service(**kwargs)
        except MessageNotFound:
            await self._notice(NO_MESSAGE)
        except ConversationNotFound:
            await self._notice(GONE)
            await self.close(code=CLOSE_NOT_FOUND)
        except PermissionDenied as exc:
            await self._notice(str(exc) or "You may not send messages in this conversation.")
        except ToolResultsRefused as exc:
            context = {"message_id": exc.message_id, "errors": sorted(exc.errors.items())}
            await self._send_template("chat/ws/tool_results_refused.html", context)
        except ValidationError as exc:
            await self._notice(" ".join(exc.messages))
        return None

    async def _run_turn(self, turn: ChatTurn) -> None:
        try:
            current: ChatTurn | None = turn
            while current is not None:
                turn = current
                await self._stream(turn)
                await self._send_finished(turn)
                current = await self._auto_continue(turn)
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("chat turn failed while streaming")
            if turn.assistant_message is not None:
                await self._send_finished(turn)
            else:  # nothing was stored: do not leave the page waiting on "Streaming…"
                await self._send_quietly("chat/ws/turn_failed.html", {"key": _key(turn)})

    # --- frames ----------------------------------------------------------------------------

    async def _stream(self, turn: ChatTurn) -> None:
        """Relay the answer's text as it streams; usage, finish and errors show from the stored
        record at the end (`_send_finished`)."""
        await self.relay(_key(turn), turn.events())

    async def _send_finished(self, turn: ChatTurn) -> None:
        """Replace the streamed text with the stored answer (once per turn)."""
        if turn.assistant_message is None or self.finished_sent:
            return
        self.finished_sent = True
        cache_break, runway = await database_sync_to_async(_answer_notes)(turn)
        context = {
            "oob_target": f"answer-{_key(turn)}",
            "message": message_view(
                turn.assistant_message,
                tools=turn.conversation.tools,
                awaiting=True,
                model_label=turn.model_label,
                alternatives=turn.answer_siblings,
                cache_break=cache_break,
            ),
            "can_send": True,  # only senders hold a socket; the service re-checks on Continue
            "runway": runway,
        }
        await self._send_quietly("chat/ws/turn_finished.html", context)


def _answer_notes(turn: ChatTurn) -> tuple[BreakShown | None, Runway | None]:
    """What the finished answer shows beside its text: where the cache broke, and the runway.
    Neither may cost the user the answer, so a failure here is logged and left out."""
    try:
        record = turn.assistant_message.usage_record if turn.assistant_message else None
        found = record_break(record) if record is not None else None
        runway = conversation_runway(team_id=turn.conversation.team_id, conversation_id=turn.conversation.pk)
        return (break_shown(found) if found is not None else None), runway
    except Exception:
        logger.exception("could not work out the cache break and runway of a finished answer")
        return None, None


def _key(turn: ChatTurn) -> int:
    """The stable DOM key of a streaming answer: its question's message id."""
    return turn.user_message.pk
