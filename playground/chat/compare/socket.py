"""The compare WebSocket: runs every column of a comparison at once and streams them side by side.

A transport adapter like the chat's (`consumers.ChatConsumer`): `connect()` lets in only a
member of the comparison's team; each message re-reads the session, is parsed
(`compare_command_parse`) and handed to the service (`comparison_run_start`), which checks
the role again. A run takes one of the user's concurrent-turn slots and counts once against
their turn rate (`chat.limits`): it is one action, however many columns it has.

Each column streams in a task of its own under the run's task, through the same relay as a
chat answer (`chat.relay`, the delta templates keyed `c<column id>`). A column's end (its
answer, an upstream error, a budget refusal) is sent as soon as it ends; the others carry on.
Stop and a disconnect cancel the run: each column's metered call still writes its record,
and we wait for that before the socket is gone.
"""

from __future__ import annotations

import asyncio
import logging
from contextlib import aclosing

from channels.db import database_sync_to_async
from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError

from playground.chat.compare.presenters import column_key, column_view
from playground.chat.compare.selectors import acomparison_get
from playground.chat.compare.services import ColumnRun, ComparisonNotFound, comparison_run_start
from playground.chat.limits import TurnRefused, TurnSlot, turn_admit
from playground.chat.sockets.chat import (
    CLOSE_NOT_FOUND,
    CLOSE_UNAUTHENTICATED,
    SIGNED_OUT,
    TemplateSocket,
    still_signed_in,
)
from playground.chat.sockets.commands import BadCommand, compare_command_parse
from playground.chat.sockets.relay import DeltaFrames, FrameRelay

logger = logging.getLogger(__name__)

BUSY = "The comparison is still running: wait for it to finish, or press Stop."
GONE = "This comparison is no longer available to you."


class CompareConsumer(TemplateSocket):
    channel_layer_alias = None  # nothing is broadcast: each run streams to its own socket
    comparison_id: int
    run_task: asyncio.Task[None] | None = None
    runs: list[ColumnRun]
    shown: set[int]  # columns whose end was sent

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        comparison = await acomparison_get(
            user=user, comparison_id=self.scope["url_route"]["kwargs"]["comparison_id"]
        )
        if comparison is None:  # another team's comparison: refused like a 404
            await self.close(code=CLOSE_NOT_FOUND)
            return
        self.comparison_id, self.runs, self.shown = comparison.pk, [], set()
        await self.accept()

    async def disconnect(self, code: int) -> None:
        await self._stop()

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if not await still_signed_in(self.scope):
            await self._notice(SIGNED_OUT)
            await self._stop()
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        try:
            action = compare_command_parse(text_data)
        except BadCommand as exc:
            await self._notice(str(exc))
            return
        if action == "stop":
            if await self._stop(by_user=True):
                await self._show_ends()
            return
        await self._start(first=action == "run")

    async def _start(self, *, first: bool) -> None:
        if self.run_task is not None and not self.run_task.done():
            await self._notice(BUSY)
            return
        try:
            slot = await turn_admit(user_id=self.scope["user"].pk)
        except TurnRefused as exc:
            await self._notice(str(exc))
            return
        runs: list[ColumnRun] = []
        try:
            runs = await database_sync_to_async(comparison_run_start)(
                user=self.scope["user"], comparison_id=self.comparison_id, first=first
            )
        except ComparisonNotFound:
            await self._notice(GONE)
            await self.close(code=CLOSE_NOT_FOUND)
        except (PermissionDenied, ValidationError) as exc:
            await self._notice(
                " ".join(getattr(exc, "messages", [])) or str(exc) or "You may not run comparisons."
            )
        finally:
            if not runs:
                await slot.release()
        if not runs:  # refused, or the page's first run was already made (a reload)
            return
        self.runs, self.shown = runs, set()
        columns = [column_view(run.column) for run in runs]
        await self._send_template("chat/ws/compare_started.html", {"columns": columns})
        self.run_task = asyncio.create_task(self._run(runs, slot), name=f"compare-{self.comparison_id}")

    async def _run(self, runs: list[ColumnRun], slot: TurnSlot) -> None:
        try:
            await asyncio.gather(*(self._column(run) for run in runs))
        finally:
            await slot.release()  # every column's record is written by now
        await self._send_quietly("chat/ws/compare_finished.html", {})

    async def _column(self, run: ColumnRun) -> None:
        """Stream one column, then show its stored answer (or why nothing was sent)."""
        if run.call is not None:
            frames = DeltaFrames({"key": column_key(run.column.pk)})
            try:
                async with (
                    FrameRelay(frames, self.send, interval=settings.CHAT_STREAM_FRAME_MS / 1000) as relay,
                    aclosing(run.events()) as events,
                ):
                    async for event in events:
                        relay.add(event)
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("a compare column failed while streaming")
        await self._show_end(run)

    async def _show_end(self, run: ColumnRun) -> None:
        if run.column.pk in self.shown or (run.call is not None and run.call.outcome is None):
            return
        self.shown.add(run.column.pk)
        context = {"column": column_view(run.column), "refusal": run.refusal, "oob": True}
        await self._send_quietly("chat/ws/compare_column.html", context)

    async def _show_ends(self) -> None:
        for run in self.runs:
            await self._show_end(run)
        await self._send_quietly("chat/ws/compare_finished.html", {})

    async def _stop(self, *, by_user: bool = False) -> bool:
        """Cancel the run and wait until every column's record is written; False if none ran."""
        task = self.run_task
        if task is None or task.done():
            return False
        for run in self.runs:
            if run.call is not None:
                run.call.stopped_by_user = by_user
        task.cancel()
        await asyncio.wait({task})
        return True
