"""The compare WebSocket: runs a turn in every column at once and streams them side by side.

The skeleton is the chat's (`sockets.base.StreamingSocket`): a signed-in member of the
comparison's team connects, each message re-reads the session, one run streams at a time
holding one of the user's concurrent-turn slots (a run is one action, however many columns it
has), and Stop or a disconnect cancels it and waits for the records. What is compare's own:
its messages (`compare_command_parse`: the page's first run, the next message, a rerun of the
last turn, Stop), each handed to a service (`compare.runs`), which checks the role again.

Each column streams in a task of its own under the run's task, through the same relay as a
chat answer (keyed by the turn and the column). A column's end (its answer, an upstream error,
a budget refusal) is sent as soon as it ends; the others carry on. When the run is over, the
column totals, the run history and the pre-flight are sent again. Stop and a disconnect
cancel the run: each column's metered call still writes its record, and we wait for that
before the socket is gone.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from channels.db import database_sync_to_async
from django.core.exceptions import PermissionDenied, ValidationError

from playground.accounts.selectors import AnyUser
from playground.chat.compare.models import Comparison
from playground.chat.compare.presenters import ComparisonView, cell_key, comparison_page
from playground.chat.compare.runs import ColumnRun, TurnRun, comparison_run_start, comparison_turn_send
from playground.chat.compare.selectors import acomparison_get
from playground.chat.compare.services import ComparisonNotFound
from playground.chat.sockets.base import CLOSE_NOT_FOUND, StreamingSocket
from playground.chat.sockets.commands import CompareCommand, compare_command_parse

logger = logging.getLogger(__name__)

BUSY = "The comparison is still running: wait for it to finish, or press Stop."
GONE = "This comparison is no longer available to you."


class CompareConsumer(StreamingSocket[CompareCommand]):
    url_kwarg = "comparison_id"
    busy = BUSY
    runs: Sequence[ColumnRun] = ()  # the run streaming, or the last one
    shown: set[int]  # columns of `runs` whose end was sent

    async def find(self, *, user: AnyUser, object_id: int) -> int | None:
        comparison = await acomparison_get(user=user, comparison_id=object_id)
        return None if comparison is None else comparison.pk

    def mark_stopped(self, *, by_user: bool) -> None:
        for run in self.runs:
            if run.call is not None:
                run.call.stopped_by_user = by_user

    def parse(self, text_data: str | None) -> CompareCommand:
        return compare_command_parse(text_data)

    async def command(self, command: CompareCommand) -> None:
        if command.action == "stop":
            if await self.stop(by_user=True):
                await self._show_ends()
            return
        await self.start(lambda: self._open(command), self._run, name=lambda _: f"compare-{self.object_id}")

    async def _open(self, command: CompareCommand) -> TurnRun | None:
        """Store the run and show its turn's columns streaming; None when refused, or when the
        page's first run was already made (a reload)."""
        user, run = self.scope["user"], None
        try:
            if command.action == "send":
                run = await database_sync_to_async(comparison_turn_send)(
                    user=user, comparison_id=self.object_id, text=command.text
                )
            else:
                run = await database_sync_to_async(comparison_run_start)(
                    user=user, comparison_id=self.object_id, first=command.action == "run"
                )
        except ComparisonNotFound:
            await self._notice(GONE)
            await self.close(code=CLOSE_NOT_FOUND)
        except (PermissionDenied, ValidationError) as exc:
            await self._notice(
                " ".join(getattr(exc, "messages", [])) or str(exc) or "You may not run comparisons."
            )
        if run is None:
            return None
        self.runs, self.shown = run.columns, set()
        page = await self._page()
        turn = next(turn for turn in page.turns if turn.id == run.turn.pk)
        await self._send_template("chat/ws/compare_started.html", {"turn": turn, "new_turn": run.new_turn})
        return run

    async def _run(self, run: TurnRun) -> None:
        await asyncio.gather(*(self._column(column) for column in run.columns))

    async def after_run(self) -> None:
        await self._show_page_end()

    async def _column(self, run: ColumnRun) -> None:
        """Stream one column, then show its stored answer (or why nothing was sent)."""
        if run.call is not None:
            try:
                await self.relay(cell_key(run.answer.turn_id, run.column.pk), run.events())
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("a compare column failed while streaming")
        await self._show_end(run)

    async def _show_end(self, run: ColumnRun) -> None:
        if run.column.pk in self.shown or (run.call is not None and run.call.outcome is None):
            return
        self.shown.add(run.column.pk)
        try:
            page = await self._page()
        except Exception:
            logger.exception("could not read a compare column's answer")
            return
        cell = page.cell(turn_id=run.answer.turn_id, column_id=run.column.pk)
        await self._send_quietly("chat/ws/compare_column.html", {"cell": cell, "oob": True})

    async def _show_ends(self) -> None:
        for run in self.runs:
            await self._show_end(run)
        await self._show_page_end()

    async def _show_page_end(self) -> None:
        """The run is over: the actions idle, and the totals, history and pre-flight anew."""
        try:
            page = await self._page()
        except Exception:
            logger.exception("could not read a comparison after its run")
            return
        await self._send_quietly(
            "chat/ws/compare_finished.html", {"page": page, "comparison_id": self.object_id}
        )

    async def _page(self) -> ComparisonView:
        return await database_sync_to_async(_comparison_page)(self.object_id)


def _comparison_page(comparison_id: int) -> ComparisonView:
    """The comparison as its page shows it (the socket's user was let in on it when it connected)."""
    return comparison_page(Comparison.objects.select_related("team").get(pk=comparison_id))
